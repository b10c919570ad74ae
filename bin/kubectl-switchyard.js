#!/usr/bin/env node
// kubectl plugin: `kubectl switchyard …` runs this (kubectl finds kubectl-switchyard on PATH).
import { main } from '../dist/src/kubectl/main.js';

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (e) => {
    console.error(`kubectl switchyard: ${e instanceof Error ? e.message : e}`);
    process.exitCode = 1;
  },
);
