import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { messageText, type CanonicalMessage, type InteractionDecision, type InteractionOption } from '#libs/contracts';
import { DispatchRelay } from '../dispatch.relay.js';
import { EventLogRepository } from '../event-log.repository.js';
import { storedBytes, type RunRecord } from '../run-record.js';
import { RunNotifier } from '../run-notifier.js';
import { CommandReads } from '../reads/command-reads.repository.js';
import type { InteractionRecord } from '../reads/run-rows.repository.js';
import { ACTIVE_STATUSES } from '../run-state.js';
import { StorageQuotas } from '../storage-quotas.service.js';
import { interactionNotFound, interactionNotOpen, invalidAnswer, runNotFound } from '../run-errors.js';
import { admitInput, commitInput, userMessage } from './command-support.js';
import { recordedOn, replayOrRefuse } from './continue-run.command.js';

/** The caller's answer to an open InteractionRequest (input, auth, confirmation). */
export interface RespondInteractionCommand {
  orgId: string;
  /** When given, the run must belong to this agent (else `run.not_found`). */
  agentId?: string;
  runId: string;
  /** The InteractionRequest answered; it must be open on the run. */
  interactionId: string;
  /** When given it must be the run's thread (A2A contextId). */
  threadId?: string;
  /** The answer; its messageId makes the command idempotent. */
  message: CanonicalMessage;
  /** The option chosen (else read from the message, see `chooseOption`). */
  optionId?: string;
  /** Who answers (API key id), recorded on the response. */
  submittedBy?: string;
  /**
   * Who sends the answer (`key:<api key id>`, `jwt:<iss>|<sub>`; null = anonymous): its messageId
   * is unique per sender. Absent: `key:<submittedBy>` when `submittedBy` is given, else the run's owner.
   */
  sentBy?: string | null;
}

/** The sender of an answer (see RespondInteractionCommand.sentBy); undefined = the run's owner. */
function senderOf(cmd: RespondInteractionCommand): string | null | undefined {
  if (cmd.sentBy !== undefined) return cmd.sentBy;
  return cmd.submittedBy !== undefined ? `key:${cmd.submittedBy}` : undefined;
}

/**
 * The option an answer chooses among `options`: `optionId` when given, else the message's
 * `metadata.optionId`, else a data part's `optionId`, else its text when it equals an option's id
 * or label (trimmed, case-insensitive). Null when it chooses none.
 */
export function chooseOption(options: readonly InteractionOption[], message: CanonicalMessage, optionId?: string): InteractionOption | null {
  const fromData = message.parts.map((p) => (p.data as { optionId?: unknown } | undefined)?.optionId).find((v) => typeof v === 'string');
  const named = optionId ?? (typeof message.metadata?.optionId === 'string' ? message.metadata.optionId : undefined) ?? fromData;
  if (named !== undefined) return options.find((o) => o.id === named) ?? null;
  const text = messageText(message.parts).trim().toLowerCase();
  return options.find((o) => o.id.toLowerCase() === text || o.label.toLowerCase() === text) ?? null;
}

const DECISION_BY_OPTION_KIND: Record<InteractionOption['kind'], InteractionDecision> = {
  approve: 'approved',
  reject: 'rejected',
  other: 'answered',
};

/**
 * RespondInteractionCommand. Reads the interaction (its options decide what the answer means),
 * then one guarded statement: the run must be active, of this agent (and thread), and the
 * interaction open; it records `interaction.responded` carrying the answer (which joins the
 * history), with the decision and option chosen; a blocking interaction's answer clears
 * `blockedReason`. When the run is no longer blocked after it, the same statement records the
 * dispatch of the execution that continues with the answer (`interactionId` in the job).
 * A duplicate answer (same sender and messageId) has no second effect.
 * Errors: `run.not_found`, `interaction.not_found`, `interaction.invalid_answer` (an interaction
 * with options and an answer that chooses none), `run.thread_mismatch`, `run.terminal`,
 * `interaction.not_open`, `run.conflict`, `org.storage_quota_exceeded` (the answer does not fit in
 * the organization's storage quota; checked once the interaction is known to exist).
 */
@Injectable()
export class RespondInteractionHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: CommandReads,
    private readonly notifier: RunNotifier,
    private readonly relay: DispatchRelay,
    private readonly quotas: StorageQuotas,
  ) {}

  async execute(cmd: RespondInteractionCommand): Promise<RunRecord> {
    const message = userMessage(cmd.message);
    const [interaction] = await this.runs.interactions(cmd.orgId, cmd.runId, cmd.interactionId);
    if (!interaction) {
      const run = await this.runs.get(cmd.orgId, cmd.runId);
      if (!run || (cmd.agentId !== undefined && run.agentId !== cmd.agentId)) throw runNotFound(cmd.runId);
      throw interactionNotFound(cmd.runId, cmd.interactionId);
    }
    // a closed interaction: a replay of its answer, or a refusal (below), without judging the answer
    if (interaction.status === 'open') {
      const retried = await admitInput(
        () => this.quotas.admit(cmd.orgId, storedBytes([{ type: 'message.added', payload: { message } }])),
        () => recordedOn(this.runs, { ...cmd, sentBy: senderOf(cmd) }),
      );
      if (retried) return retried;
      // optimistic on the run's interaction version: another interaction opening or closing
      // meanwhile means read again (a few times), this one closing means refuse or replay
      for (let attempt = 0; attempt < 4; attempt++) {
        const run = await this.runs.get(cmd.orgId, cmd.runId);
        if (!run || !(run.openInteractionIds ?? []).includes(cmd.interactionId)) break;
        const committed = await this.answer(cmd, interaction, message, run.interactionVersion);
        if (committed) return committed;
      }
    }
    const agentId = cmd.agentId ?? (await this.agentOf(cmd.orgId, cmd.runId));
    return replayOrRefuse(this.runs, { ...cmd, agentId, sentBy: senderOf(cmd) }, (run) => interactionNotOpen(run.id, cmd.interactionId));
  }

  private answer(cmd: RespondInteractionCommand, interaction: InteractionRecord, message: CanonicalMessage, interactionVersion: number): Promise<RunRecord | null> {
    const { decision, optionId } = decide(interaction, message, cmd.optionId);
    return commitInput(
      () =>
        this.events.append(
          cmd.orgId,
          cmd.runId,
          {
            from: ACTIVE_STATUSES,
            openInteractionId: cmd.interactionId,
            interactionVersion,
            threadId: cmd.threadId,
            agentId: cmd.agentId,
            ...(interaction.blocking ? { blocked: true, blockedReason: null } : {}),
          },
          [
            {
              type: 'interaction.responded',
              payload: {
                interactionId: cmd.interactionId,
                blocking: interaction.blocking,
                decision,
                ...(optionId !== undefined && { optionId }),
                message,
                ...(cmd.submittedBy !== undefined && { submittedBy: cmd.submittedBy }),
              },
            },
          ],
          { orgId: cmd.orgId, runId: cmd.runId, trigger: 'continued' },
          senderOf(cmd),
        ),
      this.notifier,
      this.relay,
    );
  }

  private async agentOf(orgId: string, runId: string): Promise<string> {
    const run = await this.runs.get(orgId, runId);
    if (!run) throw runNotFound(runId);
    return run.agentId;
  }
}

/** What the answer means for this interaction: its decision and the option it chose. */
function decide(interaction: InteractionRecord, message: CanonicalMessage, optionId?: string): { decision: InteractionDecision; optionId?: string } {
  const options = (interaction.request.options as InteractionOption[] | undefined) ?? [];
  if (options.length === 0) return { decision: 'answered' };
  const chosen = chooseOption(options, message, optionId);
  if (!chosen) {
    throw invalidAnswer(interaction.id, options.map((o) => o.id));
  }
  return { decision: DECISION_BY_OPTION_KIND[chosen.kind], optionId: chosen.id };
}
