// Wire formats shared by the lab's helper programs (lab/echo-server.ts,
// lab/client.ts) and the handles that drive them. Types only, plus tiny helpers.

/** What the echo server writes: one JSON line per TCP connection / line, one datagram per UDP datagram. */
export interface EchoReply {
  /** The pod name given to lab.pod(). */
  pod: string;
  /** The client as the server saw it (getpeername / recvfrom): "ip:port". */
  peer: string;
  /** The server's local address of this connection / the port it received on: "ip:port". */
  local: string;
  proto: 'tcp' | 'udp';
  /** What the client sent (TCP: the line, UDP: the datagram), truncated; absent for the greeting line. */
  echo?: string;
}

export interface EchoServerConfig {
  pod: string;
  tcpPorts: number[];
  udpPorts: number[];
  /** Address to bind (default 0.0.0.0). */
  host?: string;
  /** The pod's IP, reported as the UDP "local" address when bound to 0.0.0.0. */
  ip?: string;
}

export interface EchoReady {
  ready: true;
  pid: number;
  tcpPorts: number[];
  udpPorts: number[];
}

export interface EchoStats {
  /** TCP connections currently open. */
  open: number;
  /** TCP connections accepted so far. */
  accepted: number;
  /** UDP datagrams answered so far. */
  datagrams: number;
}

// ---------------------------------------------------------------------------
// client.ts requests (stdin) and responses (stdout), one JSON object per line.

export interface TcpConnectArgs {
  ip: string;
  port: number;
  count: number;
  /** Per connection: connect + first line must complete within this. */
  timeoutMs: number;
  /** Connections in flight at once (default 1). */
  concurrency?: number;
  /** Close with RST instead of FIN (no TIME_WAIT left on the client). Default false. */
  reset?: boolean;
}

export interface UdpSendArgs {
  ip: string;
  port: number;
  count: number;
  /** connect() the socket and send(), or sendto() each time on one unconnected socket. */
  connected: boolean;
  /** Per datagram: the reply must arrive within this. */
  timeoutMs: number;
}

export type TcpLoopArgs = Omit<TcpConnectArgs, 'concurrency'>;

export interface Counts {
  ok: number;
  failed: number;
  /** Failures by errno code (ECONNREFUSED, ENETUNREACH, ETIMEDOUT, ECONNRESET, ECLOSED, EBADREPLY ...). */
  errors: Record<string, number>;
  /** Successful exchanges by the pod that answered. */
  byPod: Record<string, number>;
  /** The client's addresses as the servers saw them ("ip:port" peer field of replies, IPs only, de-duplicated). */
  seenFrom: string[];
  durationMs: number;
}

export interface TcpResult extends Counts {
  /** getpeername() of each connected socket, "ip:port", de-duplicated. */
  peerNames: string[];
  /** Time from connect() to the connection being established, per successful connect. */
  connectMs: number[];
}

export interface TcpLoopFailure {
  /** Index of the connection in the loop. */
  i: number;
  /** Milliseconds since the loop started. */
  atMs: number;
  code: string;
}

export interface TcpLoopResult extends TcpResult {
  failures: TcpLoopFailure[];
}

export interface UdpResult extends Counts {
  /** Where the replies came from, as recvfrom() saw them: "ip:port", de-duplicated. */
  replySources: string[];
}

export interface WhoAmI {
  pid: number;
  /** Contents of /proc/self/cgroup. */
  procCgroup: string;
  /** The cgroup v2 path ("0::" line), e.g. "/svcmap-1a2b3c-agent". */
  cgroup: string;
  /** readlink /proc/self/ns/net, e.g. "net:[4026532281]". */
  netns: string;
}

/** A long-lived connected UDP socket (lab/udp-stream.ts). */
export interface UdpStreamArgs {
  ip: string;
  port: number;
  /** Time between one exchange's end and the next request. */
  intervalMs: number;
  /** Per request: the reply must arrive within this (else ETIMEDOUT, socket kept). */
  timeoutMs: number;
  /** A TCP connection instead (to the echo server's TCP port): connection errors reconnect, as socket errors do. */
  tcp?: boolean;
}

export interface UdpStreamStarted {
  /** The pod that answered the first request. */
  pod: string;
  /** The socket's local address, "ip:port". */
  local: string;
  /** The handle for udpStreamStop (set by the client). */
  stream?: number;
}

/** One exchange (pod: answered; code: failed), or a new socket after an error (reconnected). */
export interface UdpStreamEvent {
  atMs: number;
  local: string;
  pod?: string;
  code?: string;
  reconnected?: true;
}

/** Waits for a stream's next replies (lab/udp-stream.ts). */
export interface UdpStreamRepliesArgs {
  stream: number;
  /** Replies recorded after this request. */
  replies: number;
  /** Fails after this long without them. */
  timeoutMs: number;
}

export interface UdpStreamResult {
  events: UdpStreamEvent[];
  byPod: Record<string, number>;
  errors: Record<string, number>;
  reconnects: number;
}

/** bind() a socket to ip:port and close it again: what became of the bind. */
export interface BindArgs {
  ip: string;
  port: number;
  proto: 'tcp' | 'udp';
}

/** 'ok', or the bind's errno code (EADDRINUSE, EACCES, ...). */
export interface BindResult {
  result: string;
}

export interface ClientOps {
  tcpConnect: { args: TcpConnectArgs; result: TcpResult };
  tcpLoop: { args: TcpLoopArgs; result: TcpLoopResult };
  udpSend: { args: UdpSendArgs; result: UdpResult };
  whoami: { args: Record<string, never>; result: WhoAmI };
  bind: { args: BindArgs; result: BindResult };
  udpStreamStart: { args: UdpStreamArgs; result: UdpStreamStarted };
  udpStreamStop: { args: { stream: number }; result: UdpStreamResult };
  udpStreamReplies: { args: UdpStreamRepliesArgs; result: UdpStreamEvent[] };
}

export type ClientOp = keyof ClientOps;

export interface ClientRequest<K extends ClientOp = ClientOp> {
  id: number;
  op: K;
  args: ClientOps[K]['args'];
}

export type ClientResponse = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

export interface ClientReady {
  ready: true;
  pid: number;
}

/** "ip:port" for IPv4, "[ip]:port" for IPv6. */
export function hostPort(ip: string | undefined, port: number | undefined): string {
  const a = ip ?? '?';
  return a.includes(':') ? `[${a}]:${port ?? '?'}` : `${a}:${port ?? '?'}`;
}

/** The IP part of "ip:port" / "[ip]:port". */
export function ipOf(hp: string): string {
  if (hp.startsWith('[')) return hp.slice(1, hp.indexOf(']'));
  return hp.slice(0, hp.lastIndexOf(':'));
}
