export type ParamSpec =
  | { int: [number, number]; log?: boolean; simple?: number }
  | { pick: readonly (number | string | null)[] }
  | { bool: number; simple?: boolean };
export interface CatalogAction {
  name: string;
  phase: "start" | "handshake" | "turn" | "close" | "gateway";
  weight: number;
  finding: string;
  needs?: { root?: boolean; fs?: boolean; terminal?: boolean; solo?: boolean; keeper?: boolean };
  params: Record<string, ParamSpec>;
  about: string;
}
export const CATALOG: readonly CatalogAction[];
export const BY_NAME: ReadonlyMap<string, CatalogAction>;
export const SEQUENCE_OPTIONS: Readonly<Record<string, ParamSpec>>;
