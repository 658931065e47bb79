/** Peer authentication: mutual TLS with a private cluster CA, or a shared secret (HMAC) on trusted LANs. */
export * from "./ca.js";
export * from "./hmac.js";
export * from "./openssl.js";
export * from "./secret.js";
export * from "./security-mode.js";
export * from "./tls.js";
