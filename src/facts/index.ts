// Public surface of src/facts, re-exported from the package root.
export {};
