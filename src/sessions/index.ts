// Public surface of src/sessions, re-exported from the package root.
export {};
