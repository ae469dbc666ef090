// Lint rules that keep the layering honest: dependencies point inward
// (main -> server -> app -> domain; store -> app ports + domain).
import tseslint from 'typescript-eslint';

const nodeBuiltins = ['node:*', 'fs', 'path', 'os', 'crypto', 'events', 'stream', 'util', 'v8', 'http', 'net'];

export default tseslint.config(
  { ignores: ['gen/**', 'dist/**', 'node_modules/**', 'clients/**', 'coverage/**', '**/*.local.*'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: nodeBuiltins, message: 'src/domain is pure: no I/O.' },
          { group: ['**/gen/**', '@grpc/*', 'better-sqlite3', '**/app/**', '**/store/**', '**/server/**', '**/cli/**'], message: 'src/domain depends on nothing outside itself.' },
        ],
      }],
    },
  },
  {
    files: ['src/app/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['**/gen/**', '@grpc/*', 'better-sqlite3', '**/store/**', '**/server/**', '**/cli/**'], message: 'src/app sees only the domain and its own ports.' },
        ],
      }],
    },
  },
  {
    files: ['src/server/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['**/store/**', '!**/store/store-errors.js', '**/cli/**', '**/main.js'], message: 'the server serves the app it is given; the composition root (src/main.ts) chooses the store.' },
        ],
      }],
    },
  },
  {
    files: ['src/store/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['**/gen/**', '@grpc/*', '**/server/**', '**/cli/**'], message: 'stores implement app ports; they know nothing of gRPC.' },
        ],
      }],
    },
  },
);
