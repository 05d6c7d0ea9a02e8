export * from './runtime.js';
export * from './runtime-secrets.js';
export { DEFAULT_ANSWER_BUDGET, type AnswerBudget } from './answer-budget.js';
export * from './runtime.registry.js';
export { ScriptedRuntime, selectRule } from './scripted/scripted.runtime.js';
export { RuntimesModule, builtInRuntimes } from './runtimes.module.js';
export { HttpRuntime } from './http/http.runtime.js';
export { A2ARuntime } from './a2a/a2a.runtime.js';
