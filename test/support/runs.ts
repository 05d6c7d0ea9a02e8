import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import {
  CancelRunHandler,
  ContinueRunHandler,
  CreateRunHandler,
  RespondInteractionHandler,
  RunSettlement,
  RunViews,
  RunsModule,
  RuntimeOperations,
  type ContinueRunCommand,
  type CreateRunCommand,
} from '#libs/runs';
import { testEnv } from './env.js';
import { seedAgent } from './fixtures.js';

/**
 * Test convenience over the core's public surface: the command handlers, runtime operations,
 * views and the wait for settlement of one Nest context, under short names. `continueRun` maps a
 * message on a run the way the A2A adapter does (an answer when the run is blocked on an
 * interaction).
 */
export function runsOf(ctx: Pick<INestApplicationContext, 'get'>) {
  const create = ctx.get(CreateRunHandler);
  const cont = ctx.get(ContinueRunHandler);
  const respond = ctx.get(RespondInteractionHandler);
  const cancel = ctx.get(CancelRunHandler);
  const ops = ctx.get(RuntimeOperations);
  const views = ctx.get(RunViews);
  const settlement = ctx.get(RunSettlement);
  return {
    ops,
    views,
    createRun: (cmd: CreateRunCommand) => create.execute(cmd),
    async continueRun(cmd: ContinueRunCommand) {
      const run = await views.require(cmd.orgId, cmd.runId, cmd.agentId);
      return run.openInteractionId ? respond.execute({ ...cmd, interactionId: run.openInteractionId }) : cont.execute(cmd);
    },
    cancelRun: (orgId: string, runId: string, agentId?: string) => cancel.execute({ orgId, runId, agentId }),
    setStatus: ops.setStatus.bind(ops),
    emitMessage: ops.emitMessage.bind(ops),
    emitArtifact: ops.emitArtifact.bind(ops),
    requestInteraction: ops.requestInteraction.bind(ops),
    failRun: ops.failRun.bind(ops),
    readEvents: views.events.bind(views),
    view: views.view.bind(views),
    requireRun: views.require.bind(views),
    getRun: views.get.bind(views),
    waitUntilSettled: settlement.waitUntilSettled.bind(settlement),
  };
}
export type TestRuns = ReturnType<typeof runsOf>;

/**
 * The core alone, booted for a test file: ConfigModule (test env plus `env`), DbModule and
 * RunsModule in one initialized Nest context, with one seeded agent. The outbox relay is off
 * (dispatch rows stay readable) unless `env` turns it on. Close `ctx` after the file.
 */
export async function bootRuns(env: Record<string, string> = {}): Promise<{ ctx: INestApplicationContext; db: DatabaseService; seed: Awaited<ReturnType<typeof seedAgent>> }> {
  const mod = await Test.createTestingModule({
    imports: [ConfigModule.forRoot({ ...testEnv(), OUTBOX_RELAY_ENABLED: 'false', ...env }), DbModule, RunsModule],
  }).compile();
  const ctx = await mod.init();
  const db = ctx.get(DatabaseService);
  return { ctx, db, seed: await seedAgent(db) };
}
