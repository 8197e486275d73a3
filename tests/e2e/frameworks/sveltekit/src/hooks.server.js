// Cross-origin isolation (threads in the browser) when the request carries the cookie
// `isolated`: the test serves one build both ways. An app would send the headers always.
export async function handle({ event, resolve }) {
  const response = await resolve(event);
  if (event.cookies.get('isolated')) {
    response.headers.set('Cross-Origin-Opener-Policy', 'same-origin');
    response.headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
  }
  return response;
}
