// `npm run lint`: the import graph of src/ has no cycles, between folders (src/a/* importing
// src/b/* and back) nor between files, and no file but the entry points at the src/ root. Type-only imports count: they couple the modules too.
// swc parses the TypeScript because dependency-cruiser reads it with typescript's JavaScript
// API, which TypeScript 7 no longer ships.
module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycle',
      comment: "Data flows one way between folders: if two import each other, one holds the other's job.",
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-file-cycle',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-root-file',
      comment: 'Only the entry points sit at the src/ root; anything else has a folder, so the folder-cycle rule sees its edges.',
      severity: 'error',
      from: { path: '^src/[^/]+[.]ts$', pathNot: '^src/(main|server)[.]ts$' },
      to: {},
    },
  ],
  options: {
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
  },
};
