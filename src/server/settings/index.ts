/** The node's settings: the schema, its documentation, and where values come from. */
export { SETTING_SECTIONS, type SettingDoc, type SettingSection } from "./doc.js";
export {
  flagSettings,
  type NodeSettings,
  nodeSettingsSchema,
  SETTING_KEYS,
  type SettingKey,
  settingDefault,
  settingDefaultValue,
  settingDoc,
} from "./schema.js";
export {
  envName,
  flagName,
  OTHER_ENV,
  readConfigFile,
  readEnv,
  resolveNodeSettings,
  SettingsError,
  settingIssueText,
  splitHostPort,
} from "./sources.js";
export { type NodeConfigNumberKey, nodeConfigNumber } from "./values.js";
