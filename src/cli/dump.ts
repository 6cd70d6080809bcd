// svcmap dump: the pinned maps, decoded. Works without a running agent.
import { z } from 'zod';
import { DatapathMaps } from '../maps/datapath-maps.ts';
import type { AffinityKey, CtValue } from '../maps/codecs.ts';
import { AFFINITY_ORIGIN_SOCK, AFFINITY_ORIGIN_SOCK6, AFFINITY_ORIGIN_TC, AFFINITY_ORIGIN_TC6, CT_FLAG_NAMES } from '../maps/constants.ts';
import { ALL_MAPS, affinityMap, ctMap } from '../maps/registry.ts';
import { type Parsed, command, noHeadersFlag, parseFlags, pinDirFlag, UsageError } from './args.ts';
import { buildDumpView, renderTable, zoneNames } from './dump-view.ts';
import { bigintReplacer, formatData, isTable, outputFlag, tableStyle } from './format.ts';
import { pinDirExists, withPinAccess } from './pin-access.ts';

export const dumpCommand = command({
  name: 'dump',
  summary: 'the pinned maps, decoded: each frontend with its backends',
  description: 'Decodes the pinned maps: each frontend (VIP:port/proto) with its backends and their state. Works without a running agent.',
  flags: {
    output: outputFlag(),
    'no-headers': noHeadersFlag,
    map: { value: 'NAME', schema: z.string(), help: `prints one map's entries, decoded (${ALL_MAPS.map((m) => m.name).join(', ')})` },
    'pin-dir': pinDirFlag,
  },
});

export function dump(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(dumpCommand, argv);
  // Missing pins are openPinned's to report; pins this user may not read are not missing.
  pinDirExists(f['pin-dir']);
  withPinAccess(f['pin-dir'], () => {
    const maps = DatapathMaps.openPinned(f['pin-dir']);
    try {
      render(maps, f, out);
    } finally {
      maps.close();
    }
  });
}

function render(maps: DatapathMaps, f: Parsed<typeof dumpCommand.flags>, out: (s: string) => void): void {
  if (f.map !== undefined) {
    const m = maps.all().find((x) => x.spec.name === f.map);
    if (!m)
      throw new UsageError(`svcmap dump: --map: no map ${JSON.stringify(f.map)}; the maps are ${ALL_MAPS.map((s) => s.name).join(', ')}`);
    const entries = m.entries().map(([key, value]) => ({
      key: m.spec === affinityMap ? withAffinityOrigin(key as AffinityKey) : key,
      value: m.spec === ctMap ? withCtFlagNames(value as CtValue) : value,
    }));
    // One line an entry, every field in it: no header, and nothing more for wide to add.
    out(
      isTable(f.output)
        ? entries.map((e) => `${JSON.stringify(e.key, bigintReplacer)} => ${JSON.stringify(e.value, bigintReplacer)}`).join('\n') +
            (entries.length ? '\n' : '')
        : formatData({ map: m.spec.name, entries }, f.output),
    );
    return;
  }
  // Both families, IPv4 first (each family's ids are its own, so each is decoded against its own maps).
  // Zone ids are one table for both families.
  const zoneOf = maps.zones ? zoneNames(maps.zones.entries()) : undefined;
  const view = [maps.v4, maps.v6].flatMap((f) =>
    f ? buildDumpView(f.services.entries(), f.backends.entries(), f.revNat.entries(), f.conns?.entries(), zoneOf) : [],
  );
  out(isTable(f.output) ? renderTable(view, tableStyle(f)) : formatData({ frontends: view }, f.output));
}

/** Which datapath made an affinity entry, by name: socket (client: netns cookie), tc (client: address), their IPv6 twins socket6 and tc6 (client: the /64 in netns_cookie, the folded interface id in client_addr). */
function withAffinityOrigin(k: AffinityKey): Omit<AffinityKey, 'origin'> & { origin: string } {
  const names: Record<number, string> = {
    [AFFINITY_ORIGIN_SOCK]: 'socket',
    [AFFINITY_ORIGIN_SOCK6]: 'socket6',
    [AFFINITY_ORIGIN_TC]: 'tc',
    [AFFINITY_ORIGIN_TC6]: 'tc6',
  };
  const origin = names[k.origin] ?? String(k.origin);
  return { ...k, origin };
}

/** Conntrack flags by name (snat, closing, ...) rather than as a bit mask. */
function withCtFlagNames(v: CtValue): Omit<CtValue, 'flags'> & { flags: string[] } {
  return { ...v, flags: CT_FLAG_NAMES.filter(([bit]) => v.flags & bit).map(([, name]) => name) };
}
