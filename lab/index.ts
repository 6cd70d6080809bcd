// The lab: small local "clusters" of network namespaces for the demo, the tests and
// the benchmarks. See lab/lab.ts for the Lab class and DESIGN.md "Testing on one machine".

export { Lab } from './lab.ts';
export type { LabNs, LabNode, LabPod } from './lab.ts';
export { LabClient } from './client-handle.ts';
export { EchoServer } from './echo-handle.ts';
export { ConnHolder } from './conn-holder-handle.ts';
export type { ConnHolderConfig, ConnHolderStats } from './conn-holder-handle.ts';
export { sweepStale, registerTeardown, unregisterTeardown } from './cleanup.ts';
export { cgroup2Mount, cgroupProcs } from './cgroup.ts';
export { listNetns } from './netns.ts';
export { outputTail } from './processes.ts';
