// The constants in src/maps/constants.ts mirror bpf/include/svcmap_maps.h:
// every #define the agent relies on is parsed out of the header and compared.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import * as k from '../../src/maps/constants.ts';

const header = readFileSync(fileURLToPath(new URL('../../bpf/include/svcmap_maps.h', import.meta.url)), 'utf8');
const defines = new Map<string, string>();
for (const m of header.matchAll(/^#define\s+(\w+)\s+(\S+)/gm)) defines.set(m[1]!, m[2]!);
/** The members of `enum name { ... }` in the header, each with its explicit value. */
function enumMembers(name: string): Map<string, number> {
  const body = new RegExp(`^enum ${name} \\{([^}]*)\\};`, 'm').exec(header)?.[1];
  if (body === undefined) throw new Error(`enum ${name} is not in the header`);
  const out = new Map<string, number>();
  for (const line of body.split('\n')) {
    const code = line.replace(/\/\*.*?\*\//g, '').trim();
    if (!code) continue;
    const m = /^(\w+)\s*=\s*(\d+),$/.exec(code);
    if (!m) throw new Error(`enum ${name}: every member needs an explicit value: ${JSON.stringify(code)}`);
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

const numeric: Record<string, number> = {
  SVC_SCOPE_EXT: k.SVC_SCOPE_EXT, SVC_SCOPE_INT: k.SVC_SCOPE_INT,
  SVC_F_CLUSTERIP: k.SVC_F_CLUSTERIP, SVC_F_NODEPORT: k.SVC_F_NODEPORT, SVC_F_EXTERNALIP: k.SVC_F_EXTERNALIP,
  SVC_F_LOADBALANCER: k.SVC_F_LOADBALANCER, SVC_F_ETP_LOCAL: k.SVC_F_ETP_LOCAL, SVC_F_ITP_LOCAL: k.SVC_F_ITP_LOCAL,
  SVC_F_AFFINITY: k.SVC_F_AFFINITY, SVC_F_WILDCARD: k.SVC_F_WILDCARD, SVC_F_SRC_RANGES: k.SVC_F_SRC_RANGES,
  SVC_F_TWO_SCOPES: k.SVC_F_TWO_SCOPES, SVC_F_SH_PORT: k.SVC_F_SH_PORT,
  LB_ALG_RANDOM: k.LB_ALG_RANDOM, LB_ALG_RR: k.LB_ALG_RR, LB_ALG_SH: k.LB_ALG_SH, LB_ALG_MAGLEV: k.LB_ALG_MAGLEV,
  LB_ALG_LC: k.LB_ALG_LC, LB_ALG_SED: k.LB_ALG_SED, LB_ALG_NQ: k.LB_ALG_NQ, LB_ALG_DH: k.LB_ALG_DH, LB_SCAN_MAX: k.LB_SCAN_MAX,
  SVCMAP_MAGLEV_DEFAULT_M: k.MAGLEV_DEFAULT_M, SVCMAP_MAGLEV_MAX: k.MAGLEV_MAX, MAGLEV_SLOTS_PER_ENTRY: k.MAGLEV_SLOTS_PER_ENTRY,
  SVCMAP_ZONES_MAX: k.ZONES_MAX, SVCMAP_ZONE_NAME_LEN: k.ZONE_NAME_LEN,
  SVCMAP_SK_COUNT_MAX: k.SK_COUNT_MAX, CONNS_FIELD_SOCK: k.CONNS_FIELD_SOCK, CONNS_FIELD_TC: k.CONNS_FIELD_TC,
  BACKEND_STATE_ACTIVE: k.BACKEND_STATE_ACTIVE, BACKEND_STATE_TERMINATING: k.BACKEND_STATE_TERMINATING,
  BACKEND_F_LOCAL: k.BACKEND_F_LOCAL,
  CT_DIR_FWD: k.CT_DIR_FWD, CT_DIR_REPLY_IN: k.CT_DIR_REPLY_IN, CT_DIR_REPLY_OUT: k.CT_DIR_REPLY_OUT, CT_DIR_FRAG: k.CT_DIR_FRAG,
  CT_F_SNAT: k.CT_F_SNAT, CT_F_LOCAL: k.CT_F_LOCAL, CT_F_SEEN_REPLY: k.CT_F_SEEN_REPLY, CT_F_CLOSING: k.CT_F_CLOSING,
    CT_F_FIN_FWD: k.CT_F_FIN_FWD, CT_F_FIN_REPLY: k.CT_F_FIN_REPLY, CT_F_COUNTED: k.CT_F_COUNTED,
    AFFINITY_ORIGIN_SOCK: k.AFFINITY_ORIGIN_SOCK, AFFINITY_ORIGIN_TC: k.AFFINITY_ORIGIN_TC, AFFINITY_ORIGIN_SOCK6: k.AFFINITY_ORIGIN_SOCK6, AFFINITY_ORIGIN_TC6: k.AFFINITY_ORIGIN_TC6,
};

t.test('numeric constants match the header', async (t) => {
  for (const [name, value] of Object.entries(numeric)) {
    const raw = defines.get(name);
    t.ok(raw !== undefined, `${name} is defined in the header`);
    t.equal(Number(raw), value, name);
  }
});

t.test('map names match the header and fit the kernel limit', async (t) => {
  const names: Record<string, string> = {
    SVCMAP_MAP_SERVICES: k.MAP_SERVICES, SVCMAP_MAP_BACKENDS: k.MAP_BACKENDS,
    SVCMAP_MAP_REVNAT: k.MAP_REVNAT, SVCMAP_MAP_SK_REVNAT: k.MAP_SK_REVNAT,
    SVCMAP_MAP_CT: k.MAP_CT, SVCMAP_MAP_SRC_RANGE: k.MAP_SRC_RANGE, SVCMAP_MAP_CONFIG: k.MAP_CONFIG,
    SVCMAP_MAP_AFFINITY: k.MAP_AFFINITY, SVCMAP_MAP_METRICS: k.MAP_METRICS, SVCMAP_MAP_DEV_ADDR: k.MAP_DEV_ADDR,
    SVCMAP_MAP_SERVICES6: k.MAP_SERVICES6, SVCMAP_MAP_BACKENDS6: k.MAP_BACKENDS6, SVCMAP_MAP_REVNAT6: k.MAP_REVNAT6,
    SVCMAP_MAP_SK_REVNAT6: k.MAP_SK_REVNAT6,
    SVCMAP_MAP_CT6: k.MAP_CT6, SVCMAP_MAP_DEV_ADDR6: k.MAP_DEV_ADDR6, SVCMAP_MAP_SRC_RANGE6: k.MAP_SRC_RANGE6,
    SVCMAP_MAP_BE_CONNS: k.MAP_BE_CONNS, SVCMAP_MAP_SK_BACKEND: k.MAP_SK_BACKEND, SVCMAP_MAP_MAGLEV: k.MAP_MAGLEV, SVCMAP_MAP_SK_COUNT: k.MAP_SK_COUNT,
    SVCMAP_MAP_BE_CONNS6: k.MAP_BE_CONNS6, SVCMAP_MAP_SK_BACKEND6: k.MAP_SK_BACKEND6, SVCMAP_MAP_MAGLEV6: k.MAP_MAGLEV6,
    SVCMAP_MAP_SK_COUNT6: k.MAP_SK_COUNT6, SVCMAP_MAP_SK_TERM: k.MAP_SK_TERM, SVCMAP_MAP_SK_TERM6: k.MAP_SK_TERM6,
    SVCMAP_MAP_ZONES: k.MAP_ZONES,
  };
  for (const [macro, name] of Object.entries(names)) {
    t.equal(defines.get(macro), name, macro);
    t.ok(name.length <= 15, `${name} has at most 15 characters`);
  }
});

t.test('every SVC_F_ flag in the header is mirrored', async (t) => {
  const inHeader = [...defines.keys()].filter((n) => n.startsWith('SVC_F_'));
  t.same(inHeader.sort(), Object.keys(numeric).filter((n) => n.startsWith('SVC_F_')).sort());
});

t.test('every LB_ALG_ id in the header is mirrored, each with one name', async (t) => {
  const inHeader = [...defines.keys()].filter((n) => n.startsWith('LB_ALG_'));
  t.same(inHeader.sort(), Object.keys(numeric).filter((n) => n.startsWith('LB_ALG_')).sort());
  const ids = Object.values(k.LB_ALGORITHMS);
  t.same([...ids].sort(), inHeader.map((n) => numeric[n]!).sort(), 'LB_ALGORITHMS names every id once');
  for (const id of ids) t.equal(k.LB_ALGORITHMS[k.lbAlgorithmName(id)!], id, `id ${id} round-trips through its name`);
  t.ok(ids.every((id) => id >= 0 && id <= 0xff), 'every id fits svc_value.algorithm (a __u8)');
});

t.test('every CT_DIR_ and CT_F_ constant in the header is mirrored', async (t) => {
  for (const prefix of ['CT_DIR_', 'CT_F_']) {
    const inHeader = [...defines.keys()].filter((n) => n.startsWith(prefix));
    t.same(inHeader.sort(), Object.keys(numeric).filter((n) => n.startsWith(prefix)).sort(), prefix);
  }
});

t.test('the CT_F_ flags are distinct bits that fit ct_value.flags (a __u8)', async (t) => {
  const bits = Object.entries(numeric).filter(([n]) => n.startsWith('CT_F_')).map(([, v]) => v);
  for (const b of bits) t.ok(b > 0 && b <= 0xff && (b & (b - 1)) === 0, `0x${b.toString(16)} is one bit of a byte`);
  t.equal(bits.reduce((a, b) => a | b, 0), bits.reduce((a, b) => a + b, 0), 'no two flags share a bit');
  t.same(k.CT_FLAG_NAMES.map(([b]) => b).sort((a, b) => a - b), [...bits].sort((a, b) => a - b), 'every flag has a display name');
});

t.test('every AFFINITY_ORIGIN_ constant in the header is mirrored, and none is 0', async (t) => {
  const inHeader = [...defines.keys()].filter((n) => n.startsWith('AFFINITY_ORIGIN_'));
  t.same(inHeader.sort(), Object.keys(numeric).filter((n) => n.startsWith('AFFINITY_ORIGIN_')).sort());
  for (const n of inHeader) t.ok(numeric[n]! > 0, `${n} is not 0 (a zeroed key is no entry's)`);
});

t.test('the datapath counters: enum dp_hook and enum dp_reason are mirrored, each with a label', async (t) => {
  const hooks = enumMembers('dp_hook');
  const reasons = enumMembers('dp_reason');
  const tsHooks = Object.entries(k).filter(([n]) => n.startsWith('DP_HOOK_'));
  const tsReasons = Object.entries(k).filter(([n]) => n.startsWith('DP_R_'));
  t.same(new Map(tsHooks), hooks, 'DP_HOOK_* name for name, value for value');
  t.same(new Map(tsReasons), reasons, 'DP_R_* name for name, value for value');
  t.equal(Number(defines.get('DP_REASON_STRIDE')), k.DP_REASON_STRIDE, 'DP_REASON_STRIDE');
  t.equal(Number(defines.get('SVCMAP_METRICS_MAX')), k.SVCMAP_METRICS_MAX, 'SVCMAP_METRICS_MAX');
  t.ok(k.DP_R_MAX <= k.DP_REASON_STRIDE, 'every reason fits in a hook\'s stride');
  t.ok(k.DP_HOOK_MAX * k.DP_REASON_STRIDE <= k.SVCMAP_METRICS_MAX, 'every (hook, reason) fits in the map');

  const reasonIds = [...reasons].filter(([n]) => n !== 'DP_R_MAX').map(([, v]) => v).sort((a, b) => a - b);
  t.same(reasonIds, Array.from({ length: k.DP_R_MAX }, (_, i) => i), 'reasons are 0..DP_R_MAX-1');
  t.same(k.DP_REASONS.map((r) => r.id).sort((a, b) => a - b), reasonIds, 'every reason has exactly one label');
  t.equal(new Set(k.DP_REASONS.map((r) => r.name)).size, k.DP_REASONS.length, 'reason labels are distinct');
  const hookIds = [...hooks].filter(([n]) => n !== 'DP_HOOK_MAX').map(([, v]) => v).sort((a, b) => a - b);
  t.same(k.DP_HOOKS.map((h) => h.id).sort((a, b) => a - b), hookIds, 'every hook has exactly one label');
  const hookNames = new Set(k.DP_HOOKS.map((h) => h.name));
  for (const r of k.DP_REASONS) {
    t.ok(r.hooks.length > 0 && r.hooks.every((h) => hookNames.has(h)), `${r.name}: counted at known hooks`);
  }
});
