// A route handler: the package in Node, per request.
import { loadMHA } from 'mha-wasm';
import { check } from '../../check.js';

export const dynamic = 'force-dynamic';

export async function GET() {
  return Response.json(await check(loadMHA));
}
