import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/** The curated registry: search an organization's published agents, public, paginated, each with its card URL. */
let stack: Stack;
let orgSlug: string;

beforeAll(async () => {
  stack = await startStack({ worker: false });
  const weather = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'weather',
    description: 'Forecasts for any city',
    a2a: { skillsProjection: [{ id: 'forecast', name: 'Forecast', description: 'Weather by city', tags: ['weather', 'geo'] }], defaultInputModes: ['text/plain', 'application/json'] },
  });
  orgSlug = weather.orgSlug;
  for (const slug of ['alpha', 'beta', 'gamma']) await publishAgent(stack.baseUrl, stack.adminKey, { slug, description: `Agent ${slug}` });
  // an agent with no published revision is never listed
  await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'draft-only', name: 'Draft', description: 'not published' });
});
afterAll(async () => {
  await stack?.close();
});

const search = async (query: string) => {
  const res = await fetch(`${stack.baseUrl}/registry/${orgSlug}/agents${query}`);
  return { status: res.status, body: (await res.json()) as { agents: Array<{ slug: string; cardUrl: string; skills: Array<{ id: string }> }>; nextPageToken: string; error?: { code: string } } };
};

describe('registry search', () => {
  it('lists published agents without credentials, each with a card URL that answers', async () => {
    const all = await search('');
    expect(all.status).toBe(200);
    expect(all.body.agents.map((a) => a.slug)).toEqual(['alpha', 'beta', 'gamma', 'weather']);
    expect((await fetch(all.body.agents[3]!.cardUrl)).status).toBe(200);
  });

  it('filters by free text, skill id, tag and input mode', async () => {
    expect((await search('?q=forecast')).body.agents.map((a) => a.slug)).toEqual(['weather']);
    expect((await search('?q=CITY')).body.agents.map((a) => a.slug)).toEqual(['weather']);
    expect((await search('?skill=forecast')).body.agents.map((a) => a.slug)).toEqual(['weather']);
    expect((await search('?tag=geo')).body.agents.map((a) => a.slug)).toEqual(['weather']);
    expect((await search('?inputMode=application/json')).body.agents.map((a) => a.slug)).toEqual(['weather']);
    expect((await search('?skill=echo&q=beta')).body.agents.map((a) => a.slug)).toEqual(['beta']);
    expect((await search('?q=%25')).body.agents).toEqual([]);
  });

  it('pages with signed tokens bound to the filters', async () => {
    const first = await search('?pageSize=2');
    expect(first.body.agents.map((a) => a.slug)).toEqual(['alpha', 'beta']);
    const second = await search(`?pageSize=2&pageToken=${first.body.nextPageToken}`);
    expect(second.body.agents.map((a) => a.slug)).toEqual(['gamma', 'weather']);
    expect(second.body.nextPageToken).toBe('');
    const forged = await search(`?pageSize=2&pageToken=${Buffer.from('beta').toString('base64url')}.AAAAAAAAAAAAAAAAAAAAAA`);
    expect(forged.status).toBe(422);
    expect((await search(`?pageSize=2&q=agent&pageToken=${first.body.nextPageToken}`)).status).toBe(422);
    expect((await search('?pageSize=0')).status).toBe(422);
  });
});
