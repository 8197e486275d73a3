// The pages a user reads: README.md and the guides in docs/ (docs/*.md), as { file, text } with
// file relative to the repository. The tests that run their examples and check their links read
// them from here, so a page added to docs/ is covered without naming it.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

export function docPages() {
  const guides = readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...guides].map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }));
}

// The code block (any language) whose first line starts with `firstLine`, from any page.
export function docBlock(firstLine) {
  for (const { text } of docPages()) {
    for (const [, body] of text.matchAll(/```\w*\n([\s\S]*?)```/g)) {
      if (body.split('\n')[0].startsWith(firstLine)) return body;
    }
  }
  throw new Error(`README.md and docs/*.md have no code block starting with '${firstLine}'`);
}
