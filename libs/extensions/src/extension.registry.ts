import { AppError } from '#libs/common';
import type { A2AExtension } from '#libs/contracts';
import type { A2AExtensionPlugin } from './extension.js';

/** What a request activated, and the plugins (with their declared params) that act on it. */
export interface Negotiated {
  /** Declared URIs the request asked for (exact match), in declaration order. */
  activated: string[];
  plugins: Array<{ plugin: A2AExtensionPlugin<any>; params: unknown }>;
}

/**
 * The extensions this deployment implements, by URI (ExtensionsModule.forRoot registers them).
 * `validate` checks declarations when a revision or binding is saved; `negotiate` decides, per
 * request, what is activated (A2A v1.0 "Extensions": the intersection of the declared and the
 * requested URIs, exact match; unknown requested URIs are ignored).
 */
export class ExtensionRegistry {
  private readonly byUri = new Map<string, A2AExtensionPlugin<any>>();

  constructor(plugins: ReadonlyArray<A2AExtensionPlugin<any>>) {
    for (const p of plugins) {
      if (this.byUri.has(p.uri)) throw new Error(`extension ${p.uri} is registered twice`);
      this.byUri.set(p.uri, p);
    }
  }

  get(uri: string): A2AExtensionPlugin<any> | undefined {
    return this.byUri.get(uri);
  }

  list(): Array<A2AExtensionPlugin<any>> {
    return [...this.byUri.values()];
  }

  /**
   * Check declarations (a revision's or a binding's `extensions`): a known extension's params
   * against its schema, and its dependencies (`dependsOn`) declared in the same list (else no
   * request could ever activate it); an unknown URI is data-only and, like every data-only
   * extension, may not be `required`. Errors: `request.invalid` naming the extension and the problem.
   */
  validate(declared: readonly A2AExtension[], where: string): void {
    const uris = new Set(declared.map((e) => e.uri));
    declared.forEach((ext, i) => {
      const plugin = this.byUri.get(ext.uri);
      const path = `${where}.${i}`;
      if (!plugin || plugin.dataOnly) {
        if (ext.required) {
          throw invalid(path, `${ext.uri} is a data-only extension${plugin ? '' : ' (not implemented here)'} and must not be required: clients would have nothing to activate`);
        }
        if (!plugin) return;
      }
      const needs = (plugin.dependsOn ?? []).filter((u) => !uris.has(u));
      if (needs.length > 0) {
        throw invalid(path, `${ext.uri} depends on ${needs.join(', ')}: declare ${needs.length > 1 ? 'them' : 'it'} in the same list, or no request can activate ${ext.uri}`);
      }
      if (plugin.params) {
        const r = plugin.params.safeParse(ext.params ?? {});
        if (!r.success) {
          const message = `${ext.uri}: ${r.error.issues.map((x) => `${x.path.join('.') || '(params)'}: ${x.message}`).join('; ')}`;
          // one issue per problem, at its field (e.g. `….params.schema.properties.name.pattern`)
          const issues = r.error.issues.map((x) => ({ path: [`${path}.params`, ...x.path.map(String)].join('.'), message: `${ext.uri}: ${x.message}` }));
          throw new AppError('request.invalid', message, { details: { issues } });
        }
      }
    });
  }

  /**
   * A request's activation: `requested` (the A2A-Extensions header, parsed) against `declared`
   * (the card's). Errors: `extension.required` (a required extension not activated: A2A
   * ExtensionSupportRequired), `extension.dependency` (an activated extension needs another that
   * is not activated).
   */
  negotiate(declared: readonly A2AExtension[], requested: readonly string[]): Negotiated {
    const asked = new Set(requested);
    const activated = declared.filter((d) => asked.has(d.uri));
    const missing = declared.filter((d) => d.required && !asked.has(d.uri)).map((d) => d.uri);
    if (missing.length > 0) {
      throw new AppError('extension.required', `this agent requires extension${missing.length > 1 ? 's' : ''} ${missing.join(', ')}: activate with the A2A-Extensions header`, {
        details: { extensions: missing.join(',') },
      });
    }
    const on = new Set(activated.map((d) => d.uri));
    const plugins: Negotiated['plugins'] = [];
    for (const d of activated) {
      const plugin = this.byUri.get(d.uri);
      if (!plugin) continue;
      const needs = (plugin.dependsOn ?? []).filter((u) => !on.has(u));
      if (needs.length > 0) {
        throw new AppError('extension.dependency', `extension ${d.uri} needs ${needs.join(', ')} activated too (A2A-Extensions)`, { details: { extension: d.uri, missing: needs.join(',') } });
      }
      plugins.push({ plugin, params: d.params ?? {} });
    }
    return { activated: activated.map((d) => d.uri), plugins };
  }
}

/** Parse an `A2A-Extensions` / `X-A2A-Extensions` header value: comma-separated URIs, trimmed, deduplicated. */
export function parseExtensionsHeader(value: string | string[] | undefined): string[] {
  const raw = Array.isArray(value) ? value.join(',') : (value ?? '');
  return [...new Set(raw.split(',').map((s) => s.trim()).filter((s) => s.length > 0 && s.length <= 2048))].slice(0, 50);
}

function invalid(path: string, message: string): AppError {
  return new AppError('request.invalid', message, { details: { issues: [{ path, message }] } });
}
