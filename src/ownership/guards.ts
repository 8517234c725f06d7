// The guards live with the signaller in src/facts/guards.ts (the layer that
// sends signals must be able to ask them); ownership code imports them here.
export * from "../facts/guards.js";
