// The operators' dashboard: a React app bundled by Vite into dist/ui, which the gateway serves at /ui.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic' } },
  build: { outDir: fileURLToPath(new URL('../dist/ui', import.meta.url)), emptyOutDir: true, chunkSizeWarningLimit: 1024 },
  logLevel: 'warn',
});
