/**
 * Vega-Lite spec → SVG → PNG, headless: vega-lite compiles to a Vega spec, a Vega View with renderer
 * "none" produces the SVG text (no DOM, no canvas), and @resvg/resvg-js rasterizes it.
 */
import { Resvg } from "@resvg/resvg-js";
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** Font present on most Linux machines; resvg falls back to any system sans font otherwise. */
const FONT = "DejaVu Sans";

export interface RenderedFigure {
  svg: string;
  png: Buffer;
}

export async function renderVegaLite(spec: TopLevelSpec): Promise<RenderedFigure> {
  const withFont: TopLevelSpec = {
    ...spec,
    config: {
      font: FONT,
      background: "white",
      ...(spec.config ?? {}),
    },
  } as TopLevelSpec;
  const vgSpec = compile(withFont).spec;
  const view = new vega.View(vega.parse(vgSpec), { renderer: "none" });
  try {
    const svg = await view.toSVG();
    const png = new Resvg(svg, {
      fitTo: { mode: "zoom", value: 2 },
      font: { loadSystemFonts: true, defaultFontFamily: FONT },
      background: "white",
    })
      .render()
      .asPng();
    return { svg, png };
  } finally {
    view.finalize();
  }
}
