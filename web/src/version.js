// Kept equal to package.json's "version" (a test checks it): importing JSON
// is not portable across Node, browsers and bundlers.
export const VERSION = '0.1.0';
