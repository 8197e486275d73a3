// An endpoint: the package in Node, per request.
import { json } from '@sveltejs/kit';
import { loadMHA } from 'mha-wasm';
import { check } from '$lib/check.js';

export async function GET() {
  return json(await check(loadMHA));
}
