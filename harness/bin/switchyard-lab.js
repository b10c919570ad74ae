#!/usr/bin/env node
import { main } from '../../dist/harness/cli.js';

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (e) => {
    console.error(`switchyard-lab: ${e instanceof Error ? e.message : e}`);
    process.exitCode = 1;
  },
);
