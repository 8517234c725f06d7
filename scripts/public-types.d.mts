// Types for public-types.mjs.
export interface PublicTypesEntry {
  specifier: string;
  /** exported types that appear in no signature of an exported value, sorted */
  unneeded: string[];
}

export declare function unneededTypes(
  root?: string,
  entries?: ReadonlyArray<{ specifier: string; source: string }>,
): PublicTypesEntry[];
