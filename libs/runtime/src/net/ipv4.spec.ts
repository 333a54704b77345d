import { formatNet, parseIpv4Cidr } from './ipv4.js';

describe('parseIpv4Cidr', () => {
  it('reads networks and bare addresses', () => {
    expect(parseIpv4Cidr('10.213.0.0/16')).toEqual({ base: 0x0ad50000, prefix: 16 });
    expect(formatNet(parseIpv4Cidr('203.0.113.7') as never)).toBe('203.0.113.7/32');
    expect(formatNet(parseIpv4Cidr('0.0.0.0/0') as never)).toBe('0.0.0.0/0');
  });

  it('says what is wrong with anything else', () => {
    expect(parseIpv4Cidr('10.0.0.1/8')).toBe('"10.0.0.1/8" has host bits set: the network is 10.0.0.0/8');
    expect(parseIpv4Cidr('10.0.0.0/33')).toMatch(/prefix length outside 0-32/);
    expect(parseIpv4Cidr('example.com')).toMatch(/not an IPv4 address/);
    expect(parseIpv4Cidr('::1/128')).toMatch(/not an IPv4 address/);
    expect(parseIpv4Cidr('1.2.3.0/24/1')).toMatch(/not an IPv4 address/);
  });
});
