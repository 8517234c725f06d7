// Public surface of src/ownership, re-exported from the package root.
export {};
