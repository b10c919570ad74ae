#!/usr/bin/env node
/*
 * The agent runs with a small young generation: V8's default semi-spaces (up to 16 MiB each,
 * three of them) fill with the garbage of every apply and stay resident; 2 MiB semi-spaces cost
 * more frequent scavenges and save ~100 MiB of RSS at 10,000 Services (docs/footprint.md).
 * The flag must be given before V8 sizes its heap, so the agent re-executes itself once (same
 * pid, same arguments) unless it was given already; SWITCHYARD_SEMI_SPACE_MIB sets the size,
 * 0 keeps V8's default.
 * The same re-execution sets MALLOC_ARENA_MAX=2 (glibc reads it when the process starts) unless
 * the environment has it: each thread that mallocs (libuv's pool, V8's workers) otherwise gets an
 * arena of its own whose freed pages stay resident, ~10 MiB at 1,000 Services for nothing the
 * agent needs (docs/footprint.md).
 */
const semi = process.env.SWITCHYARD_SEMI_SPACE_MIB ?? '2';
const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((a) => a.startsWith('--max-semi-space-size'));
const addSemi = semi !== '0' && !given;
const addArenas = process.env.MALLOC_ARENA_MAX === undefined;
if (process.argv[2] === 'agent' && (addSemi || addArenas) && typeof process.execve === 'function') {
  process.execve(
    process.execPath,
    [process.execPath, ...(addSemi ? [`--max-semi-space-size=${semi}`] : []), ...process.execArgv, ...process.argv.slice(1)],
    { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2' },
  );
}

const { main } = await import('../dist/src/cli/main.js');
main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (e) => {
    console.error(`switchyard: ${e instanceof Error ? e.message : e}`);
    process.exitCode = 1;
  },
);
