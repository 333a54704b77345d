import { publicGatewayUrl } from './public-url.js';

describe('publicGatewayUrl', () => {
  it('uses the Host header when no proxy is in front', () => {
    expect(publicGatewayUrl({ host: '127.0.0.1:1994' })).toBe('http://127.0.0.1:1994');
  });

  it('prefers the proxy headers, first hop only', () => {
    expect(publicGatewayUrl({ host: '10.0.0.5:1994', 'x-forwarded-proto': 'https, http', 'x-forwarded-host': 'tern.example.com' })).toBe(
      'https://tern.example.com',
    );
    expect(publicGatewayUrl({ host: 'x', forwarded: 'for=1.2.3.4;proto=https;host="api.example.com:8443"' })).toBe(
      'https://api.example.com:8443',
    );
    expect(publicGatewayUrl({ host: 'tern.example.com', 'x-forwarded-prefix': '/tern/' })).toBe('http://tern.example.com/tern');
    expect(publicGatewayUrl({ host: '[::1]:1994' })).toBe('http://[::1]:1994');
  });

  it('never lets shell syntax into the command line', () => {
    expect(publicGatewayUrl({ host: 'evil.com;rm -rf ~' })).toBe('http://localhost:1994');
    expect(publicGatewayUrl({ host: 'ok.com', 'x-forwarded-proto': 'javascript', 'x-forwarded-prefix': '/$(id)' })).toBe('http://ok.com');
    expect(publicGatewayUrl({})).toBe('http://localhost:1994');
  });
});
