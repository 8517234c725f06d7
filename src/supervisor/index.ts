// Public surface of src/supervisor, re-exported from the package root.
export {};
