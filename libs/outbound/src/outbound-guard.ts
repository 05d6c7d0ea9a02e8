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
 * that is not public unicast; IPv4-mapped IPv6 addresses are judged as their IPv4 address.
 */
export function refusedAddress(address: string, policy: OutboundPolicy): string | null {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(address);
  } catch {
    return `${address} is not an IP address`;
  }
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  for (const [net, bits] of policy.allowedCidrs) {
    if (net.kind() === addr.kind() && addr.match([net, bits] as never)) return null;
  }
  const range = addr.range();
  return range === 'unicast' ? null : `${addr.toString()} is a ${range} address`;
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
