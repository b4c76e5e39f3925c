/**
 * The console's only way to make DOM: elements are built with createElement and every string
 * becomes a text node (or an attribute value through setAttribute). There is no innerHTML anywhere
 * (a test greps for it), so a bot, room or message named `<script>…` is shown as those characters.
 */

export type Child = Node | string | number | null | undefined | false | Child[];

type Handler = (event: Event) => void;

export interface Props {
  [attribute: string]: string | number | boolean | null | undefined | Record<string, Handler>;
  /** Event listeners: `on: { click: … }` (attributes named on… are refused). */
  on?: Record<string, Handler>;
}

/** Link targets the console makes: its own routes and pages, or another gateway's console over http(s). */
function safeUrl(value: string): string {
  if (value.startsWith("#") || (value.startsWith("/") && !value.startsWith("//"))) return value;
  try {
    const url = new URL(value);
    if (url.protocol === "http:" || url.protocol === "https:") return url.href;
  } catch {
    // not a URL
  }
  return "#";
}

function apply(el: Element, props: Props | null | undefined): void {
  if (!props) return;
  for (const [name, value] of Object.entries(props)) {
    if (name === "on") {
      for (const [event, handler] of Object.entries(value as Record<string, Handler>)) el.addEventListener(event, handler);
      continue;
    }
    if (/^on/i.test(name)) throw new Error(`attribute ${name}: use on: { … } for listeners`);
    if (value === null || value === undefined || value === false) continue;
    const text = value === true ? "" : String(value);
    el.setAttribute(name, name === "href" || name === "src" || name === "action" ? safeUrl(text) : text);
  }
}

function append(el: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
}

/** An HTML element with attributes and children (strings become text). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props?: Props | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element (for the Mesh picture), with the same rules. */
export function svg(tag: string, props?: Props | null, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  apply(el, props);
  append(el, children);
  return el;
}

/** Replaces an element's children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}
