export * from './runtime.js';
export * from './runtime.registry.js';
export { ScriptedRuntime, selectRule } from './scripted/scripted.runtime.js';
