#!/usr/bin/env node
// The `unique-jobs` executable (package.json "bin"): runs the command line and exits with its code.
import { runCli } from './cli.js';

// Output piped into a reader that stops early (`| head -1`): the rest is not wanted, and the command still ends as it
// would (a change it makes is not cut off halfway); without a listener the closed pipe is an unhandled 'error'.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
});

process.exitCode = await runCli(process.argv.slice(2));
