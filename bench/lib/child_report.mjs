// The children's side of run.mjs's runChild (bench/child.mjs,
// bench/browser/child.mjs): the result of main(argv), or { error } with the
// first line of what it threw, as one JSON line on stdout; then exit (an
// engine's worker threads would keep the process alive).
export async function reportResult(main) {
  let report;
  try {
    report = await main(process.argv.slice(2));
  } catch (error) {
    report = { error: String(error?.message ?? error).split('\n')[0].slice(0, 400) };
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}
