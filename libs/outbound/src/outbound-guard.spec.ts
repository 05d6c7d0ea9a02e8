import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { checkOutboundUrl, embeddedIPv4, outboundPolicy, refusedAddress, refusedLiteral } from './outbound-guard.js';

const strict = outboundPolicy([]);

/** Teredo (RFC 4380 §4): server 65.54.227.120, flags 0x8000, port 40000; the client's IPv4 address inverted in the last 32 bits. */
function teredo(client: string): string {
  const [a, b, c, d] = ipaddr.IPv4.parse(client).octets as [number, number, number, number];
  const hi = ((a << 8) | b) ^ 0xffff;
  const lo = ((c << 8) | d) ^ 0xffff;
  return `2001:0:4136:e378:8000:63bf:${hi.toString(16)}:${lo.toString(16)}`;
}

/** Each form with a private (or otherwise not public) and a public embedded IPv4 address. */
const FORMS: Array<{ form: string; refused: Array<[string, string]>; allowed: Array<[string, string]> }> = [
  {
    form: 'IPv4-compatible',
    // hex: ipaddr.js reads the dotted `::a.b.c.d` as `::ffff:a.b.c.d` (see the URL test below)
    refused: [['::7f00:1', 'loopback'], ['::a00:1', 'private'], ['::a9fe:a9fe', 'linkLocal'], ['::0:0:0:e000:1', 'multicast']],
    allowed: [['::5db8:d822', '93.184.216.34']],
  },
  {
    form: 'IPv4-mapped',
    refused: [['::ffff:7f00:1', 'loopback'], ['::ffff:10.0.0.1', 'private'], ['::ffff:169.254.169.254', 'linkLocal']],
    allowed: [['::ffff:93.184.216.34', '93.184.216.34']],
  },
  {
    form: 'IPv4-translated',
    refused: [['::ffff:0:127.0.0.1', 'loopback'], ['::ffff:0:192.168.1.1', 'private']],
    allowed: [['::ffff:0:93.184.216.34', '93.184.216.34']],
  },
  {
    form: 'NAT64',
    refused: [['64:ff9b::127.0.0.1', 'loopback'], ['64:ff9b::a9fe:a9fe', 'linkLocal'], ['64:ff9b:1::10.1.2.3', 'private'], ['64:ff9b:1:abcd::100.64.0.1', 'carrierGradeNat']],
    allowed: [['64:ff9b::93.184.216.34', '93.184.216.34'], ['64:ff9b:1::5db8:d822', '93.184.216.34']],
  },
  {
    form: '6to4',
    refused: [['2002:7f00:1::1', 'loopback'], ['2002:a9fe:a9fe:1::', 'linkLocal'], ['2002:c0a8:101::', 'private']],
    allowed: [['2002:5db8:d822::1', '93.184.216.34']],
  },
  {
    form: 'Teredo',
    refused: [[teredo('127.0.0.1'), 'loopback'], [teredo('10.0.0.1'), 'private'], [teredo('169.254.169.254'), 'linkLocal']],
    allowed: [[teredo('93.184.216.34'), '93.184.216.34']],
  },
];

describe('the outbound guard: IPv6 addresses that carry an IPv4 address', () => {
  for (const { form, refused, allowed } of FORMS) {
    it(`${form}: judged by the embedded address`, () => {
      for (const [address, range] of refused) {
        expect(embeddedIPv4(ipaddr.IPv6.parse(address))?.form, address).toBe(form);
        expect(refusedAddress(address, strict), address).toMatch(new RegExp(`is a ${range} address \\(.+ as ${form}\\)`));
      }
      for (const [address, ipv4] of allowed) {
        expect(embeddedIPv4(ipaddr.IPv6.parse(address)), address).toEqual({ ipv4: ipaddr.IPv4.parse(ipv4), form });
        expect(refusedAddress(address, strict), address).toBeNull();
      }
    });
  }

  it('the Teredo client address is the inverted last 32 bits (the server address is not the one judged)', () => {
    expect(embeddedIPv4(ipaddr.IPv6.parse('2001:0:4136:e378:8000:63bf:80ff:fffe'))?.ipv4.toString()).toBe('127.0.0.1');
    // a Teredo address whose server field is private but whose client is public is the client's
    expect(refusedAddress('2001:0:a00:1:8000:63bf:a247:27dd', strict)).toBeNull();
  });

  it('an embedded address is allowlisted the way the IPv4 address would be; an IPv6 allowlist entry covers the IPv6 form', () => {
    const loopback = outboundPolicy(['127.0.0.0/8']);
    for (const a of ['::127.0.0.1', '::ffff:7f00:1', '::ffff:0:127.0.0.1', '64:ff9b::127.0.0.1', '2002:7f00:1::', teredo('127.0.0.1')]) {
      expect(refusedAddress(a, loopback), a).toBeNull();
      expect(refusedAddress(a, outboundPolicy(['10.0.0.0/8'])), a).toMatch(/loopback/);
    }
    expect(refusedAddress('2002:c0a8:101::1', outboundPolicy(['2002:c0a8:101::/48']))).toBeNull();
    // the IPv4 allowlist does not open another embedded address
    expect(refusedAddress('::ffff:10.0.0.1', loopback)).toMatch(/private/);
  });

  it(':: and ::1 stay the IPv6 unspecified and loopback addresses (::1/128 allowlists ::1, not ::127.0.0.1)', () => {
    expect(embeddedIPv4(ipaddr.IPv6.parse('::'))).toBeNull();
    expect(embeddedIPv4(ipaddr.IPv6.parse('::1'))).toBeNull();
    expect(refusedAddress('::', strict)).toMatch(/unspecified/);
    expect(refusedAddress('::1', strict)).toMatch(/loopback/);
    const v6loop = outboundPolicy(['::1/128']);
    expect(refusedAddress('::1', v6loop)).toBeNull();
    expect(refusedAddress('::127.0.0.1', v6loop)).toMatch(/loopback/);
  });

  it('other IPv6 addresses keep their own range: public unicast passes, unique local, link-local and documentation do not', () => {
    expect(embeddedIPv4(ipaddr.IPv6.parse('2606:2800:220:1:248:1893:25c8:1946'))).toBeNull();
    expect(refusedAddress('2606:2800:220:1:248:1893:25c8:1946', strict)).toBeNull();
    expect(refusedAddress('fd00::1', strict)).toMatch(/uniqueLocal/);
    expect(refusedAddress('fe80::1', strict)).toMatch(/linkLocal/);
    expect(refusedAddress('2001:db8::1', strict)).toMatch(/reserved/);
  });

  it('the dotted IPv4-compatible spelling is judged by the same IPv4 address (ipaddr.js takes it for IPv4-mapped)', () => {
    expect(embeddedIPv4(ipaddr.IPv6.parse('::127.0.0.1'))?.ipv4.toString()).toBe('127.0.0.1');
    expect(refusedAddress('::127.0.0.1', strict)).toMatch(/loopback/);
    expect(refusedAddress('::10.0.0.1', strict)).toMatch(/private/);
    expect(refusedAddress('::93.184.216.34', strict)).toBeNull();
    // WHATWG URL parsing spells it in hex, which is what reaches the guard from a URL
    expect(new URL('http://[::127.0.0.1]/').hostname).toBe('[::7f00:1]');
  });

  it('URL literals: the push URL check and the connect-time literal check refuse the embedded loopback forms', async () => {
    for (const url of ['http://[::127.0.0.1]/', 'http://[::ffff:7f00:1]/', 'https://[64:ff9b::a9fe:a9fe]/latest', 'http://[2002:7f00:1::1]:8080/hook']) {
      await expect(checkOutboundUrl(url, strict), url).rejects.toMatchObject({ code: 'push.url_refused', message: expect.stringMatching(/URL refused: .* is a (loopback|linkLocal) address/) });
      expect(refusedLiteral(new URL(url), strict), url).not.toBeNull();
    }
    await expect(checkOutboundUrl('http://[::93.184.216.34]/hook', strict)).resolves.toBeInstanceOf(URL);
    expect(refusedLiteral(new URL('http://[2002:5db8:d822::1]/'), strict)).toBeNull();
  });
});
