// Cross-origin isolation (threads in the browser) when the request carries the cookie
// `isolated`: the test serves one build both ways. An app would send the headers always.
const ISOLATION = [
  { key: 'Cross-Origin-Opener-Policy', value: 'same-origin' },
  { key: 'Cross-Origin-Embedder-Policy', value: 'require-corp' },
];

export default {
  async headers() {
    return [{ source: '/:path*', has: [{ type: 'cookie', key: 'isolated' }], headers: ISOLATION }];
  },
};
