// svcmap agent: flags -> config -> runAgent, with signal handling.
import { z } from 'zod';
import { defaultCgroup } from '../bpf/environment.ts';
import { runAgent } from '../agent/agent.ts';
import { LOG_LEVELS, createLogger } from '../agent/log.ts';
import { intString, parseFlags, pinDirFlag } from './args.ts';

export const agentHelp = `svcmap agent --manifests DIR [flags]
  Loads the datapath, attaches it to a cgroup, and keeps the maps in sync.
  --manifests DIR        directory of Service/EndpointSlice YAML (file source)
  --cgroup PATH          cgroup v2 directory to attach the socket hooks to
                         (default: the cgroup v2 mount root)
  --pin-dir DIR          bpffs directory for pins (default /sys/fs/bpf/svcmap)
  --node-name NAME       this node's name, for local endpoints (env NODE_NAME)
  --bpf-dir DIR          where compiled BPF objects are cached (default build/bpf)
  --compile              compile the BPF programs even if a cached object matches
  --max-services N       services map capacity for a new map (default 65536)
  --max-backends N       backends map capacity for a new map (default 65536)
  --log-level LEVEL      debug, info, warn or error (default info)`;

const schema = z.object({
  manifests: z.string({ message: 'is required (a directory of Service and EndpointSlice manifests)' }).min(1),
  cgroup: z.string().startsWith('/', 'must be an absolute path').optional(),
  'pin-dir': pinDirFlag,
  'node-name': z.string().optional(),
  'bpf-dir': z.string().optional(),
  compile: z.boolean().default(false),
  'max-services': intString(1, 16_777_216).optional(),
  'max-backends': intString(1, 16_777_216).optional(),
  'log-level': z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
});

export async function agent(argv: string[]): Promise<void> {
  const f = parseFlags(argv, {
    manifests: { type: 'string' },
    cgroup: { type: 'string' },
    'pin-dir': { type: 'string' },
    'node-name': { type: 'string' },
    'bpf-dir': { type: 'string' },
    compile: { type: 'boolean' },
    'max-services': { type: 'string' },
    'max-backends': { type: 'string' },
    'log-level': { type: 'string' },
  }, schema, 'agent');
  const log = createLogger(f['log-level']);
  const nodeName = f['node-name'] ?? process.env.NODE_NAME;
  const running = await runAgent({
    manifests: f.manifests,
    cgroup: f.cgroup ?? defaultCgroup(),
    pinDir: f['pin-dir'],
    ...(nodeName ? { nodeName } : {}),
    ...(f['bpf-dir'] ? { objectDir: f['bpf-dir'] } : {}),
    forceCompile: f.compile,
    ...(f['max-services'] ? { maxServices: f['max-services'] } : {}),
    ...(f['max-backends'] ? { maxBackends: f['max-backends'] } : {}),
  }, log);
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => running.stop());
  await running.stopped;
}
