// Builds the web client into dist/: app.js and app.css bundled and
// minified by esbuild, and index.html copied. The output depends only on
// the sources and the locked packages, so web/build_test.go can rebuild it
// and compare it with what is checked in.
//
//   node build.mjs [OUTDIR]   (default dist)

import { build } from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';

const out = process.argv[2] || 'dist';
await mkdir(out, { recursive: true });
await build({
  entryPoints: ['src/app.js'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome110', 'firefox115', 'safari16'],
  legalComments: 'none',
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
});
await build({
  entryPoints: ['src/style.css'],
  bundle: true,
  minify: true,
  outfile: join(out, 'app.css'),
  logLevel: 'warning',
});
await copyFile('src/index.html', join(out, 'index.html'));
