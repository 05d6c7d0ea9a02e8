import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { AppError } from '#libs/common';

/**
 * Where outbound calls (push deliveries) may go. Only public unicast addresses, unless an address
 * falls in one of `allowedCidrs` (e.g. `127.0.0.0/8` for local development and tests).
 */
export interface OutboundPolicy {
  allowedCidrs: ReadonlyArray<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
}

/** Parse `PUSH_ALLOWED_CIDRS` entries. Throws on an entry that is not a CIDR (or a bare address). */
export function outboundPolicy(cidrs: readonly string[]): OutboundPolicy {
  return {
    allowedCidrs: cidrs.map((c) => {
      if (c.includes('/')) return ipaddr.parseCIDR(c);
      const a = ipaddr.parse(c);
      return [a, a.kind() === 'ipv4' ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number];
    }),
  };
}

/**
 * Why `address` may not be reached under `policy`, or null when it may. Refused: loopback,
 * private (RFC 1918, unique local), link-local (which holds the 169.254.169.254 metadata
 * service), multicast, unspecified, broadcast, carrier-grade NAT, reserved and every other range
 * that is not public unicast. An IPv6 address that carries an IPv4 address (see
 * `embeddedIPv4`: IPv4-compatible, -mapped, -translated, NAT64, 6to4, Teredo) is judged as that
 * IPv4 address, allowlist included: `::127.0.0.1` and `2002:7f00:1::` are loopback, and pass
 * only where `127.0.0.0/8` is allowed (or the IPv6 address itself is).
 */
export function refusedAddress(address: string, policy: OutboundPolicy): string | null {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(address);
  } catch {
    return `${address} is not an IP address`;
  }
  if (allowlisted(addr, policy)) return null;
  const embedded = addr.kind() === 'ipv6' ? embeddedIPv4(addr as ipaddr.IPv6) : null;
  if (embedded) {
    if (allowlisted(embedded.ipv4, policy)) return null;
    const range = embedded.ipv4.range();
    return range === 'unicast' ? null : `${addr.toString()} is a ${range} address (${embedded.ipv4.toString()} as ${embedded.form})`;
  }
  const range = addr.range();
  return range === 'unicast' ? null : `${addr.toString()} is a ${range} address`;
}

function allowlisted(addr: ipaddr.IPv4 | ipaddr.IPv6, policy: OutboundPolicy): boolean {
  return policy.allowedCidrs.some(([net, bits]) => net.kind() === addr.kind() && addr.match([net, bits] as never));
}

/** The 32 bits of an IPv4 address, as the two 16-bit parts of an IPv6 address that hold it. */
type Embedding = (parts: number[]) => [number, number];
const LAST_32: Embedding = (p) => [p[6]!, p[7]!];

/**
 * IPv6 ranges that carry an IPv4 address, and where: ranges per ipaddr.js's special ranges
 * (`ipv4Mapped`, `rfc6145`, `rfc6052`, `6to4`, `teredo`) plus the deprecated IPv4-compatible
 * `::/96` (RFC 4291 §2.5.5.1), which ipaddr.js calls unicast. NAT64's local-use `64:ff9b:1::/48`
 * (RFC 8215) is read with the /96 layout of RFC 6052 §2.2 (the address in the last 32 bits), the
 * layout of the well-known prefix.
 */
const EMBEDDINGS: ReadonlyArray<{ form: string; net: [ipaddr.IPv6, number]; ipv4: Embedding }> = [
  { form: 'IPv4-mapped', net: ipaddr.IPv6.parseCIDR('::ffff:0:0/96'), ipv4: LAST_32 },
  { form: 'IPv4-translated', net: ipaddr.IPv6.parseCIDR('::ffff:0:0:0/96'), ipv4: LAST_32 },
  { form: 'NAT64', net: ipaddr.IPv6.parseCIDR('64:ff9b::/96'), ipv4: LAST_32 },
  { form: 'NAT64', net: ipaddr.IPv6.parseCIDR('64:ff9b:1::/48'), ipv4: LAST_32 },
  // RFC 3056 §2: 2002:V4ADDR::/48
  { form: '6to4', net: ipaddr.IPv6.parseCIDR('2002::/16'), ipv4: (p) => [p[1]!, p[2]!] },
  // RFC 4380 §4: the client's address in the last 32 bits, every bit inverted
  { form: 'Teredo', net: ipaddr.IPv6.parseCIDR('2001::/32'), ipv4: (p) => [p[6]! ^ 0xffff, p[7]! ^ 0xffff] },
  { form: 'IPv4-compatible', net: ipaddr.IPv6.parseCIDR('::/96'), ipv4: LAST_32 },
];

/**
 * The IPv4 address an IPv6 address carries, and the form it is carried in (see EMBEDDINGS), or
 * null for any other address. `::` and `::1` (inside `::/96`) are not embeddings: they are the
 * IPv6 unspecified and loopback addresses.
 */
export function embeddedIPv4(addr: ipaddr.IPv6): { ipv4: ipaddr.IPv4; form: string } | null {
  const range = addr.range();
  if (range === 'unspecified' || range === 'loopback') return null;
  const hit = EMBEDDINGS.find((e) => addr.match(e.net));
  if (!hit) return null;
  const [hi, lo] = hit.ipv4(addr.parts);
  return { ipv4: new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]), form: hit.form };
}

/**
 * Why the host of `url` may not be reached under `policy` when it is an IP literal; null when it
 * may, or when it is a name (names are checked on the address actually connected to: see
 * `guardedLookup`).
 */
export function refusedLiteral(url: URL, policy: OutboundPolicy): string | null {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return ipaddr.isValid(host) ? refusedAddress(host, policy) : null;
}

/**
 * A `lookup` for `http.request` that resolves like the system resolver but refuses any answer
 * containing an address the policy forbids: the check happens at connect time, on the address
 * actually used, so a name that re-resolves to a private address (DNS rebinding) gets nowhere.
 */
export function guardedLookup(policy: OutboundPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as LookupAddress[];
      for (const a of list) {
        const why = refusedAddress(a.address, policy);
        if (why) return callback(Object.assign(new Error(`refused: ${hostname} resolves to ${why}`), { code: 'EREFUSEDADDRESS' }), '', 0);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * Check a push URL when it is configured: http(s) only, no credentials in it, and every address
 * its host resolves to allowed by the policy. Errors: `push.url_refused` with the reason (the A2A
 * adapter maps it to InvalidParams).
 */
export async function checkOutboundUrl(raw: string, policy: OutboundPolicy): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refused(raw, 'it is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw refused(raw, `the scheme ${url.protocol.replace(/:$/, '')} is not allowed (http or https only)`);
  if (url.username || url.password) throw refused(raw, 'credentials in the URL are not allowed (use authentication)');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(host)) {
    const why = refusedAddress(host, policy);
    if (why) throw refused(raw, why);
    return url;
  }
  const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
    dnsLookup(host, { all: true }, (err, list) => (err ? reject(err) : resolve(list))),
  ).catch((e: NodeJS.ErrnoException) => {
    throw refused(raw, `its host does not resolve (${e.code ?? e.message})`);
  });
  for (const a of addresses) {
    const why = refusedAddress(a.address, policy);
    if (why) throw refused(raw, `${host} resolves to ${why}`);
  }
  return url;
}

function refused(url: string, why: string): AppError {
  return new AppError('push.url_refused', `URL refused: ${why}`, { details: { url: url.slice(0, 200), reason: why } });
}
