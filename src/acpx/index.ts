// Public surface of src/acpx, re-exported from the package root.
export {};
