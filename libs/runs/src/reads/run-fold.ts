import type { CanonicalMessage, SequencedOutputEnvelope } from '#libs/contracts';
import type { RunRecord } from '../run-record.js';
import { foldState } from '../run-state.js';
import { cleanArtifact, cleanMessage, type RunView, type StoredArtifact } from './run-rows.repository.js';

/**
 * The event types `foldRunView` folds (a runtime's saved state is in no view); any other one in
 * the envelopes makes it give up (null).
 */
const FOLDED = new Set(['run.status_changed', 'message.added', 'artifact.updated', 'run.runtime_state_saved']);

/** An artifact.updated payload as the log holds it (ArtifactChunkSchema after parsing). */
interface ChunkPayload {
  artifactId: string;
  name?: string | null;
  description?: string | null;
  parts: StoredArtifact['parts'];
  metadata?: Record<string, unknown> | null;
  extensions?: string[] | null;
  append?: boolean;
  lastChunk?: boolean;
}

/**
 * The read model of a run folded from its log, without reading it back: `run` and `history` as the
 * run's first commit left them (a created run: `run.created` and the user's `message.added`, the
 * message as appended), then `envelopes`, the log's envelopes from `run.lastSequence + 1` on,
 * contiguous (each commit's, as RunNotifier's wake-ups carry them). Gives exactly what
 * RunViews.view (RUN_VIEW_SQL over the projections the append statement writes) gives for the
 * same log: the state of the newest status event (run-state.ts foldState) and its time
 * (`statusAt`), its message as the status message, the messages of the events carrying one
 * (oldest first, the last `historyLength`), the artifacts' chunks folded as the append folds them
 * (parts from the last chunk that does not append on, the last name / description / metadata
 * given, the last chunk's lastChunk, the first chunk's extensions), in order of first chunk.
 * Returns null when it cannot: an event of another type (interactions, links, resumptions: their
 * projections are read instead), envelopes that do not continue `run.lastSequence` one by one,
 * or a run whose first commit held artifacts or a status change (not a created run).
 * test/run-fold.test.ts compares it with RunViews.view on logs appended through the append path.
 */
export function foldRunView(
  run: RunRecord,
  history: readonly CanonicalMessage[],
  envelopes: readonly SequencedOutputEnvelope[],
  opts: { historyLength?: number } = {},
): RunView | null {
  if (run.status !== 'submitted' || run.blockedReason !== null) return null;
  let seq = run.lastSequence;
  let status: SequencedOutputEnvelope | undefined;
  const messages: CanonicalMessage[] = history.map((m) => cleanMessage(m as Parameters<typeof cleanMessage>[0]));
  const artifacts = new Map<string, StoredArtifact>();
  for (const e of envelopes) {
    if (e.sequence !== seq + 1 || e.runId !== run.id || !FOLDED.has(e.event.type)) return null;
    seq = e.sequence;
    const payload = e.event.payload as { message?: CanonicalMessage };
    // every event carrying a message has a row in `messages` (the append's message projection)
    if (payload.message) messages.push(cleanMessage(payload.message as Parameters<typeof cleanMessage>[0]));
    if (e.event.type === 'run.status_changed') status = e;
    else if (e.event.type === 'artifact.updated') foldChunk(artifacts, e.event.payload as ChunkPayload);
  }
  const state = status ? foldState(status.event) : { status: run.status, blockedReason: run.blockedReason };
  const last = envelopes[envelopes.length - 1];
  const limit = opts.historyLength;
  return {
    run: {
      ...run,
      status: state.status,
      blockedReason: state.blockedReason,
      lastSequence: seq,
      statusAt: status ? new Date(status.occurredAt) : run.statusAt,
      updatedAt: last ? new Date(last.occurredAt) : run.updatedAt,
      openInteractionId: null,
    },
    statusMessage: status ? (((status.event.payload as { message?: CanonicalMessage }).message ?? null) as CanonicalMessage | null) : null,
    history: limit === undefined ? messages : limit <= 0 ? [] : messages.slice(-limit),
    artifacts: [...artifacts.values()].map(cleanArtifact),
  };
}

/** One chunk onto the artifacts folded so far (the append statement's art_agg / upsert, one chunk at a time). */
function foldChunk(artifacts: Map<string, StoredArtifact>, c: ChunkPayload): void {
  const a = artifacts.get(c.artifactId);
  if (!a) {
    artifacts.set(c.artifactId, {
      artifactId: c.artifactId,
      name: c.name ?? undefined,
      description: c.description ?? undefined,
      parts: [...c.parts],
      metadata: c.metadata ?? undefined,
      extensions: c.extensions ?? undefined,
      complete: c.lastChunk ?? false,
    });
    return;
  }
  a.parts = c.append ? [...a.parts, ...c.parts] : [...c.parts];
  if (c.name != null) a.name = c.name;
  if (c.description != null) a.description = c.description;
  // the statement keeps a given metadata, JSON null included (which reads back as none)
  if (c.metadata !== undefined) a.metadata = c.metadata ?? undefined;
  a.complete = c.lastChunk ?? false;
}
