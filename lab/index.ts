// The lab: small local "clusters" of network namespaces for the demo, the tests and
// the benchmarks. See lab/lab.ts for the Lab class and DESIGN.md "Testing on one machine".

export { Lab } from './lab.ts';
export type { LabOptions, LabNs, LabNode, LabPod, NsRef, LinkEnd, LabLink, EchoServerOptions, ClientOptions } from './lab.ts';
export { LabClient } from './client-handle.ts';
export { EchoServer } from './echo-handle.ts';
export { sweepStale, readRecords, ownerAlive, RECORD_DIR, registerTeardown, unregisterTeardown } from './cleanup.ts';
export type { Teardown } from './cleanup.ts';
export type { SweepReport, SweepOptions, RunRecord } from './cleanup.ts';
export { cgroup2Mount, cgroupProcs, joinCgroup } from './cgroup.ts';
export { listNetns, pidsInNetns, NETNS_DIR, netnsPath } from './netns.ts';
export { outputTail, spawnArgv } from './processes.ts';
export type { SpawnOptions } from './processes.ts';
export { CommandError } from './run.ts';
export type * from './protocol.ts';
