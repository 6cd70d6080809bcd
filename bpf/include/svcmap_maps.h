/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The one definition of every map key and value that svcmap's datapath and
 * agent share. The TypeScript codecs in src/maps/ describe the same layouts
 * and are checked against the BTF that clang emits for this header; a field
 * moved here without moving it there stops the agent at start.
 *
 * Byte order: addresses and ports are network byte order (what the socket
 * hooks and packets carry); ids, counts and flags are host order.
 *
 * The file is grouped by concern: first every map's name and default size,
 * then per concern (services, Maglev, backends, reverse NAT, conntrack,
 * source ranges, affinity, connection counts, node settings, the socket
 * hooks' settings, counters, socket termination) its constants and its
 * structs, each IPv4 struct next to its IPv6 twin.
 *
 * IPv6 frontends and backends: maps of their own beside the IPv4 ones (as
 * Cilium does), so the IPv4 datapath and its layouts stay as they are. The
 * same rules as their IPv4 twins: slot 0 of svcmap_svc6 is the master entry
 * (struct svc_value, shared), slots 1..count hold ids into svcmap_be6, and
 * rev_nat_id keys svcmap_revnat6. Ids are their own space per family.
 * Addresses are 16 bytes in network order, as four __be32 words: what
 * bpf_sock_addr.user_ip6 carries.
 */
#ifndef SVCMAP_MAPS_H
#define SVCMAP_MAPS_H

#include <linux/types.h>

/* Map names (at most 15 characters: the kernel's BPF_OBJ_NAME_LEN - 1). */
#define SVCMAP_MAP_SERVICES   svcmap_svc
#define SVCMAP_MAP_BACKENDS   svcmap_be
#define SVCMAP_MAP_REVNAT     svcmap_revnat
#define SVCMAP_MAP_SK_REVNAT  svcmap_sk_rnat
#define SVCMAP_MAP_CT         svcmap_ct
#define SVCMAP_MAP_SRC_RANGE  svcmap_srcrng
#define SVCMAP_MAP_CONFIG     svcmap_cfg
#define SVCMAP_MAP_AFFINITY   svcmap_affin
#define SVCMAP_MAP_METRICS    svcmap_metrics
#define SVCMAP_MAP_DEV_ADDR   svcmap_devaddr
#define SVCMAP_MAP_BE_CONNS   svcmap_be_conns
#define SVCMAP_MAP_SK_BACKEND svcmap_sk_be
#define SVCMAP_MAP_MAGLEV     svcmap_maglev
#define SVCMAP_MAP_ZONES      svcmap_zones
#define SVCMAP_MAP_SOCK_CFG   svcmap_sockcfg
#define SVCMAP_MAP_SOCK_BYP   svcmap_sock_byp
#define SVCMAP_MAP_SK_COUNT   svcmap_sk_count /* not pinned: the recount's working set */
#define SVCMAP_MAP_SK_TERM    svcmap_sk_term  /* not pinned: socket termination's working set */

/* The IPv6 twins. */
#define SVCMAP_MAP_SERVICES6   svcmap_svc6
#define SVCMAP_MAP_BACKENDS6   svcmap_be6
#define SVCMAP_MAP_REVNAT6     svcmap_revnat6
#define SVCMAP_MAP_SK_REVNAT6  svcmap_sk_rnat6
#define SVCMAP_MAP_CT6         svcmap_ct6
#define SVCMAP_MAP_SRC_RANGE6  svcmap_srcrng6
#define SVCMAP_MAP_DEV_ADDR6   svcmap_devaddr6
#define SVCMAP_MAP_BE_CONNS6   svcmap_conns6
#define SVCMAP_MAP_SK_BACKEND6 svcmap_sk_be6
#define SVCMAP_MAP_MAGLEV6     svcmap_maglev6
#define SVCMAP_MAP_SK_COUNT6   svcmap_sk_cnt6
#define SVCMAP_MAP_SK_TERM6    svcmap_sk_term6

/* Default capacities (each IPv6 twin as its IPv4 map); the agent may resize
 * before load (--max-*). */
#define SVCMAP_SERVICES_MAX  65536
#define SVCMAP_BACKENDS_MAX  65536
#define SVCMAP_REVNAT_MAX    65536
#define SVCMAP_SK_REVNAT_MAX 262144
#define SVCMAP_CT_MAX        262144
#define SVCMAP_SRC_RANGE_MAX 16384
#define SVCMAP_AFFINITY_MAX  65536
#define SVCMAP_DEV_ADDR_MAX  1024
#define SVCMAP_BE_CONNS_MAX  65536
#define SVCMAP_MAGLEV_MAX    65536
#define SVCMAP_SOCK_BYP_MAX  1024
#define SVCMAP_ZONES_MAX     1024
#define SVCMAP_SK_COUNT_MAX  65536
#define SVCMAP_SK_TERM_MAX   1024

/* ==== Services: svcmap_svc, svcmap_svc6 ==== */

/* svc_key.scope: external traffic sees the external entry; a service with
 * a Local traffic policy also has an internal entry holding all backends. */
#define SVC_SCOPE_EXT 0
#define SVC_SCOPE_INT 1

/* svc_value.flags (master entry). */
#define SVC_F_CLUSTERIP    0x0001
#define SVC_F_NODEPORT     0x0002
#define SVC_F_EXTERNALIP   0x0004
#define SVC_F_LOADBALANCER 0x0008
#define SVC_F_ETP_LOCAL    0x0010 /* externalTrafficPolicy: Local */
#define SVC_F_ITP_LOCAL    0x0020 /* internalTrafficPolicy: Local */
#define SVC_F_AFFINITY     0x0040 /* sessionAffinity: ClientIP */
#define SVC_F_WILDCARD     0x0080 /* NodePort on any local address (0.0.0.0) */
#define SVC_F_SRC_RANGES   0x0100 /* loadBalancerSourceRanges apply */
#define SVC_F_TWO_SCOPES   0x0200 /* an internal-scope entry exists too */
#define SVC_F_SH_PORT      0x0400 /* LB_ALG_SH at tc: hash the source port too */
/* A Pod's hostPort (its only backend is that Pod): with SVC_F_WILDCARD, or on
 * a loopback address, it serves the node's own sockets only, whatever
 * SOCK_CFG_LOCALHOST4/6 say (those are about NodePorts); it holds no port
 * against bind() (SOCK_CFG_BIND_PROTECT is about NodePorts too). */
#define SVC_F_HOSTPORT 0x0800
/* Direct server return (--lb-mode dsr, or hybrid on a TCP entry): a remote
 * backend gets the client's packets with the client's address kept and the
 * frontend carried alongside; its node answers the client directly. */
#define SVC_F_DSR 0x1000

/*
 * svc_value.algorithm: how a new connection picks one of the frontend's
 * slots (lb_select_backend()). Session affinity applies on top of any.
 *  LB_ALG_RANDOM: uniform random (kube-proxy iptables' semantics).
 *  LB_ALG_RR:     round robin: the master entry's rr_next, advanced
 *                 atomically, modulo count.
 *  LB_ALG_SH:     source hash: socket LB hashes the client's network
 *                 namespace cookie (the source address is not known at
 *                 connect()), tc the client address (and source port with
 *                 SVC_F_SH_PORT).
 *  LB_ALG_MAGLEV: consistent hashing: the frontend's Maglev table
 *                 (svcmap_maglev, see below) maps a hash of the client (as
 *                 LB_ALG_SH's at the socket LB; tc the 5-tuple) to a slot.
 *  LB_ALG_LC:     least connections: the slot whose backend has the fewest
 *                 active connections (struct backend_conns, sock + tc), the
 *                 scan starting at a random slot so that ties spread.
 *  LB_ALG_SED:    shortest expected delay, (active + 1) / weight; every
 *                 weight is 1 (Kubernetes has no endpoint weights).
 *  LB_ALG_NQ:     never queue: an idle backend first, else as LB_ALG_SED.
 *  LB_ALG_DH:     destination hash: the frontend's address and port, so
 *                 every client of one frontend gets the same slot while the
 *                 count is unchanged.
 * The scan of LB_ALG_LC/SED/NQ looks at LB_SCAN_MAX slots at most: a
 * frontend with more looks at LB_SCAN_MAX consecutive slots (wrapping)
 * from a random one.
 */
#define LB_ALG_RANDOM 0
#define LB_ALG_RR     1
#define LB_ALG_SH     2
#define LB_ALG_MAGLEV 3
#define LB_ALG_LC     4
#define LB_ALG_SED    5
#define LB_ALG_NQ     6
#define LB_ALG_DH     7

#define LB_SCAN_MAX 64

/*
 * services: one master entry (slot 0) per frontend and one entry per
 * backend slot (1..count). Readers look up the master, pick a slot in
 * 1..count, then the backend id it holds.
 */
struct svc_key {
	__be32 addr; /* frontend address (ClusterIP, node IP, LB IP, ...) */
	__be16 port; /* frontend port */
	__u16 slot;  /* 0 = master entry, 1..count = backend slot */
	__u8 proto;  /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 scope;  /* SVC_SCOPE_* */
	__u8 pad[2];
};

/* The IPv6 frontend key (svcmap_svc6): as struct svc_key. */
struct svc6_key {
	__be32 addr[4]; /* frontend address */
	__be16 port;    /* frontend port */
	__u16 slot;     /* 0 = master entry, 1..count = backend slot */
	__u8 proto;     /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 scope;     /* SVC_SCOPE_* */
	__u8 pad[2];
};

/*
 * backend_id doubles, in the master entry (slot 0), as the round-robin
 * counter of an LB_ALG_RR frontend: the datapath advances it with an atomic
 * fetch-and-add in place (a hash map value, shared by every CPU and both
 * datapaths). The agent writes 0 there and rewrites a master only when its
 * other fields change, which restarts the rotation: harmless.
 */
struct svc_value {
	__u32 backend_id; /* slot > 0: the backend; master: rr counter */
	__u32 rev_nat_id; /* master: key into the reverse NAT map */
	__u16 count;      /* master: number of backend slots */
	__u16 flags;      /* master: SVC_F_* */
	__u8 algorithm;   /* master: LB_ALG_* */
	__u8 pad[3];
	__u32 affinity_timeout; /* master: seconds, with SVC_F_AFFINITY */
};

/* ==== Maglev tables: svcmap_maglev, svcmap_maglev6 ==== */

/*
 * Maglev lookup tables (LB_ALG_MAGLEV): svcmap_maglev is a hash of maps,
 * the frontend's rev_nat_id (__u32) -> its table, an inner
 * BPF_MAP_TYPE_ARRAY (BPF_F_INNER_MAP, so sizes may differ) of
 * 1 + ceil(M / MAGLEV_SLOTS_PER_ENTRY) struct maglev_entry: entry 0's
 * slot[0] holds M (a prime of the agent's list, default
 * SVCMAP_MAGLEV_DEFAULT_M); hash position p's slot (1..count) is
 * slot[p % 4] of entry 1 + p / 4. Four to an entry because the kernel
 * stores an array's values 8-byte aligned: one __u16 per entry would take
 * 8 bytes. The agent fills a new inner map whole and then puts it in the
 * outer map with one update, so a reader sees the old table or the new one,
 * never a half-built one, and the size travels with its contents. Slots,
 * not backend ids: session affinity and the slot fallback work as for
 * every other algorithm. A table names only slots that exist when it is
 * published (after the slots, before the master and the stale slots).
 */
#define SVCMAP_MAGLEV_DEFAULT_M 16381
#define MAGLEV_SLOTS_PER_ENTRY  4

struct maglev_entry {
	__u16 slot[MAGLEV_SLOTS_PER_ENTRY];
};

/* ==== Backends: svcmap_be, svcmap_be6, svcmap_zones ==== */

/* backend_value.state */
#define BACKEND_STATE_ACTIVE      0
#define BACKEND_STATE_TERMINATING 1 /* serving+terminating, used while none is ready */

/* backend_value.flags */
#define BACKEND_F_LOCAL 0x01 /* the endpoint runs on this node */

/* backends: backend id -> endpoint. One id per (addr, port, proto). */
struct backend_value {
	__be32 addr;
	__be16 port;
	__u8 proto;
	__u8 state; /* BACKEND_STATE_* */
	__u8 flags; /* BACKEND_F_* */
	__u8 pad;
	__u16 zone; /* zone id (svcmap_zones), 0 = none given */
#ifdef SVCMAP_TEST_LAYOUT
	/* Only in the objects built for SVCMAP_TEST_LAYOUT=1: a layout that
	 * differs, for the upgrade tests' migration (docs/upgrade.md). */
	__u32 reserved_test;
#endif
};

struct backend6_value {
	__be32 addr[4];
	__be16 port;
	__u8 proto;
	__u8 state; /* BACKEND_STATE_* */
	__u8 flags; /* BACKEND_F_* */
	__u8 pad;
	__u16 zone; /* zone id (svcmap_zones), 0 = none given */
};

/*
 * Zone names (svcmap_zones): zone id (__u32, 1..SVCMAP_ZONES_MAX) -> the
 * zone an EndpointSlice gave the endpoint (its topology.kubernetes.io/zone),
 * which backend_value.zone and backend6_value.zone name by id. For svcmap
 * dump: the datapath does not read it (the model applies zone hints). The
 * agent writes a name before any backend names its id and deletes it only
 * after none does, so every id a backend holds has its name. A name is a
 * label value: at most 63 bytes, NUL-terminated.
 */
#define SVCMAP_ZONE_NAME_LEN 64
struct zone_name {
	char name[SVCMAP_ZONE_NAME_LEN];
};

/* ==== Reverse NAT: svcmap_revnat(6), per socket svcmap_sk_rnat(6) ==== */

/* reverse NAT: rev_nat_id (__u32) -> the frontend a reply must appear to come from. */
struct rev_nat_value {
	__be32 addr;
	__be16 port;
	__u16 pad;
};

struct rev_nat6_value {
	__be32 addr[4];
	__be16 port;
	__u16 pad;
};

/*
 * Per-socket reverse NAT (LRU): which frontend a socket asked for when it
 * was sent to a backend. recvmsg4 and getpeername4 use it to show the VIP.
 */
struct sk_rev_nat_key {
	__u64 cookie; /* bpf_get_socket_cookie() */
	__be32 addr;  /* backend address */
	__be16 port;  /* backend port */
	__u16 pad;
};

struct sk_rev_nat_value {
	__be32 addr; /* frontend address */
	__be16 port; /* frontend port */
	__u16 pad;
	__u32 rev_nat_id;
};

/* Per-socket reverse NAT of IPv6 sockets (LRU), as sk_rev_nat_key/value. */
struct sk_rev_nat6_key {
	__u64 cookie;   /* bpf_get_socket_cookie() */
	__be32 addr[4]; /* backend address */
	__be16 port;    /* backend port */
	__u8 pad[6];
};

struct sk_rev_nat6_value {
	__be32 addr[4]; /* frontend address */
	__be16 port;    /* frontend port */
	__u16 pad;
	__u32 rev_nat_id; /* into svcmap_revnat6 */
};

/* ==== Connection tracking (tc): svcmap_ct, svcmap_ct6 ==== */

/*
 * Connection tracking for the tc datapath (LRU), keyed by the packet's
 * 5-tuple as it arrives, plus where it was seen:
 *  CT_DIR_FWD:       client -> frontend, at ingress: the translation to apply
 *                    (DNAT to the backend, SNAT to the node when remote).
 *  CT_DIR_REPLY_IN:  backend -> node (SNAT address/port), at ingress: back to
 *                    frontend -> client.
 *  CT_DIR_REPLY_OUT: backend -> client (no SNAT), at egress: the source back
 *                    to the frontend.
 *  CT_DIR_FRAG:      an IP datagram in fragments, by {saddr, daddr, sport =
 *                    the IP id, dport = 0, proto} as it arrives: the address
 *                    translation its first fragment got, for the others
 *                    (bpf/lib/frag.h); removed with its last fragment.
 */
#define CT_DIR_FWD       0
#define CT_DIR_REPLY_IN  1
#define CT_DIR_REPLY_OUT 2
#define CT_DIR_FRAG      3

#define CT_F_SNAT  0x01 /* the flow is source-NATed to the node */
#define CT_F_LOCAL 0x02 /* the backend runs on this node */
/*
 * The flow's state, coarsely, as the packets that passed show it. Both
 * entries of a flow carry the same state bits (a change seen on one is
 * copied to the other at once), so each alone tells the agent's conntrack
 * GC how long the flow may stay idle:
 *  CT_F_SEEN_REPLY: a packet came back from the backend: TCP established,
 *                   UDP answered.
 *  CT_F_FIN_FWD:    TCP: the client sent a FIN.
 *  CT_F_FIN_REPLY:  TCP: the backend sent a FIN.
 *  CT_F_CLOSING:    TCP: the connection is going away: an RST in either
 *                   direction, or a FIN from each side. (A single FIN is a
 *                   half-close: the other side may go on sending for as
 *                   long as it likes, so that flow keeps its full lifetime.)
 * A TCP SYN without ACK on a flow with any of FIN/RST seen starts the flow
 * afresh (the client reuses its port for a new connection).
 */
#define CT_F_SEEN_REPLY 0x04
#define CT_F_CLOSING    0x08
#define CT_F_FIN_FWD    0x10
#define CT_F_FIN_REPLY  0x20
/* The flow counts for its backend (struct backend_conns, tc): set on the
 * forward entry when a flow to a frontend whose algorithm reads the counts
 * is created open; only such a flow's close takes the count down. */
#define CT_F_COUNTED 0x40
/* Direct server return (SVC_F_DSR). On the ingress node, a forward entry:
 * DNAT only, the backend's node answers the client itself, so no reply
 * entry exists; the flow's first packets (TCP: the SYN; UDP: every one)
 * carry the frontend to it (bpf/lib/dsr.h). On the backend's node, a lone
 * CT_DIR_REPLY_OUT entry {backend -> client} written from that option: the
 * backend's answers leave with the frontend as their source. */
#define CT_F_DSR 0x80
/* A closed flow's lone reply entry quiet for this long is left to the
 * agent's conntrack GC, not taken over by a new SNAT flow (the reasons are
 * at its use in bpf/lib/nat.h). The GC's closing lifetime must be longer:
 * the agent reads this value from here and refuses a shorter one. */
#define SNAT_TAKE_OVER_MAX_NS 9000000000ULL

struct ct_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 dir; /* CT_DIR_* */
	__u8 pad[2];
};

/*
 * svcmap_ct6, the IPv6 twin: its entries follow every rule of svcmap_ct's
 * (CT_DIR_*, CT_F_*, the agent's conntrack GC collects both maps);
 * rev_nat_id and backend_id are of svcmap_revnat6 and svcmap_be6.
 */
struct ct6_key {
	__be32 saddr[4];
	__be32 daddr[4];
	__be16 sport;
	__be16 dport;
	__u8 proto; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 dir;   /* CT_DIR_* (no CT_DIR_FRAG: IPv6 fragments are passed) */
	__u8 pad[2];
};

struct ct_value {
	__be32 new_saddr; /* 0: leave the source address */
	__be32 new_daddr; /* 0: leave the destination address */
	__be16 new_sport; /* 0: leave the source port */
	__be16 new_dport; /* 0: leave the destination port */
	__u32 backend_id; /* CT_DIR_FWD: the backend chosen for the flow */
	__u32 rev_nat_id;
	__u8 flags; /* CT_F_* */
	__u8 pad[3];
	__u64 last_seen; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC), refreshed at most once a second */
};

struct ct6_value {
	__be32 new_saddr[4]; /* all zero: leave the source address */
	__be32 new_daddr[4]; /* all zero: leave the destination address */
	__be16 new_sport;
	__be16 new_dport;
	__u32 backend_id;
	__u32 rev_nat_id;
	__u8 flags; /* CT_F_* */
	__u8 pad[3];
	__u64 last_seen; /* as struct ct_value's */
};

/* ==== loadBalancerSourceRanges (tc): svcmap_srcrng, svcmap_srcrng6 ==== */

/*
 * loadBalancerSourceRanges (LPM trie): a frontend (by rev_nat_id) with
 * SVC_F_SRC_RANGES accepts a client only if {rev_nat_id, saddr} matches.
 * prefixlen counts the 32 bits of rev_nat_id plus the CIDR's mask length.
 */
struct src_range_key {
	__u32 prefixlen;
	__u32 rev_nat_id;
	__be32 addr;
};

/*
 * loadBalancerSourceRanges of IPv6 frontends (LPM trie), as struct
 * src_range_key: prefixlen counts the 32 bits of rev_nat_id (of
 * svcmap_revnat6) plus the CIDR's mask length.
 */
struct src_range6_key {
	__u32 prefixlen;
	__u32 rev_nat_id;
	__be32 addr[4];
};

/* ==== Session affinity: svcmap_affin ==== */

/*
 * Session affinity (sessionAffinity: ClientIP), LRU: which backend a client
 * last got from a frontend, shared by the socket hooks and the tc programs
 * and kept apart by origin. Only frontends with SVC_F_AFFINITY read or write
 * it. The client is:
 *  AFFINITY_ORIGIN_SOCK: the network namespace of the connecting socket
 *                        (bpf_get_netns_cookie): a pod is a network
 *                        namespace, so this is kube-proxy's per-client-IP
 *                        affinity for pods; every host-network process of
 *                        the node shares the host namespace's identity (as
 *                        in Cilium, and as they share the node's address
 *                        under kube-proxy). client_addr is 0.
 *  AFFINITY_ORIGIN_TC:   the packet's source address (netns_cookie is 0).
 *  AFFINITY_ORIGIN_SOCK6: as AFFINITY_ORIGIN_SOCK, for IPv6 frontends (their
 *                        rev_nat_id is of svcmap_revnat6, a space of its own).
 *  AFFINITY_ORIGIN_TC6:  as AFFINITY_ORIGIN_TC, for IPv6 frontends: the
 *                        client's /64 prefix in netns_cookie (its first 8
 *                        bytes as they lie) and its interface id folded to
 *                        32 bits (the XOR of its two words) in client_addr.
 *                        Two clients of one /64 whose folds are equal share
 *                        an entry: they get one backend, as affinity would
 *                        give either.
 * An entry is used only while it is younger than the frontend's
 * affinity_timeout (counted from its last use) and its slot of the frontend
 * still holds its backend; otherwise a new choice overwrites it.
 */
#define AFFINITY_ORIGIN_SOCK  1
#define AFFINITY_ORIGIN_TC    2
#define AFFINITY_ORIGIN_SOCK6 3
#define AFFINITY_ORIGIN_TC6   4

struct affinity_key {
	__u64 netns_cookie; /* AFFINITY_ORIGIN_SOCK: the client's network namespace */
	__be32 client_addr; /* AFFINITY_ORIGIN_TC: the client's address */
	__u32 rev_nat_id;   /* the frontend (its master entry's rev_nat_id) */
	__u8 origin;        /* AFFINITY_ORIGIN_* */
	__u8 pad[7];
};

struct affinity_value {
	__u64 last_used;  /* bpf_ktime_get_boot_ns() (CLOCK_BOOTTIME) of the last connection */
	__u32 backend_id; /* the backend chosen */
	__u16 slot;       /* the frontend slot (1..count) that held it when chosen */
	__u16 pad;
};

/* ==== Connection counts: svcmap_be_conns, svcmap_conns6, socket storage ==== */

/*
 * Live connections per backend (hash map, backend id -> struct
 * backend_conns), what LB_ALG_LC/SED/NQ read. Only connections through a
 * frontend with one of those algorithms are counted (lb_alg_counts() in
 * lib/conns.h): the default path pays nothing for them. Each datapath
 * counts into its own field with atomic adds; the agent adjusts a field
 * only through the same atomic add (svcmap_conns_adjust), never by a write.
 *  sock: connected sockets the socket LB sent to the backend: +1 at
 *        connect4 (TCP and connected UDP), -1 when the socket is released
 *        (cgroup sock_release) or connects elsewhere. The socket remembers
 *        its backend in struct sk_backend (socket storage).
 *  tc:   tc flows to the backend: +1 when a flow's forward conntrack entry
 *        is created open, -1 when the flow starts closing (CT_F_CLOSING), is
 *        forgotten by the datapath, or collected by the agent's GC while
 *        open. The agent's recount sets it from the conntrack map.
 * Signed: a decrement whose increment was not counted (state from before a
 * restart of the map, a race) can go below 0; readers take that as 0.
 * Entries of removed backends are deleted by the agent's recount.
 */
struct backend_conns {
	__s64 sock;
	__s64 tc;
};

/*
 * Socket storage (BPF_MAP_TYPE_SK_STORAGE) of a socket the socket LB
 * connected to a backend: which one, so that the release (or a reconnect)
 * decrements that backend's count. addr/port are the backend's when chosen:
 * a decrement is skipped when the id now names another endpoint (the id was
 * freed and reused). backend_id 0: not counted (released or reconnected to
 * an address that is no frontend).
 */
struct sk_backend {
	__u32 backend_id;
	__be32 addr;
	__be16 port;
	__u16 pad;
};

/*
 * Connection counts, Maglev tables and the socket storage of IPv6 frontends
 * and backends: the IPv4 maps' twins (struct backend_conns, struct
 * maglev_entry tables, the recount) keyed by the IPv6 ids (svcmap_be6,
 * svcmap_revnat6), which are a space of their own. A socket counted for an
 * IPv6 backend keeps it in svcmap_sk_be6; one connected through an
 * IPv4-mapped VIP counts in the IPv4 maps.
 */
struct sk_backend6 {
	__u32 backend_id;
	__be32 addr[4];
	__be16 port;
	__u16 pad;
};

/*
 * The socket recount (bpf/sock_count.c), hash map svcmap_sk_count: one run
 * of the socket storage iterator counts the live sockets per struct
 * sk_backend (the whole value is the key, pad 0), for the agent to match
 * against the backends map. Not pinned: the agent's working set for one run.
 * The value is a __u64 count.
 */

/* What the agent's svcmap_conns_adjust programs (BPF_PROG_TYPE_SYSCALL)
 * take as context: add delta to one field of a backend's counts. */
#define CONNS_FIELD_SOCK 0
#define CONNS_FIELD_TC   1

/* family 0 or 4: svcmap_be_conns; 6: svcmap_conns6 (IPv6 backend ids). */
struct conns_adjust {
	__u32 backend_id;
	__u16 field;  /* CONNS_FIELD_* */
	__u16 family; /* 0 (4) or 6 */
	__s64 delta;
};

/* ==== Node settings (tc): svcmap_cfg, svcmap_devaddr, svcmap_devaddr6 ==== */

/* The node's settings for the tc datapath: array map, one entry at key 0. */
struct svcmap_config {
	__be32 node_ip;      /* the node's InternalIP (for dump; SNAT uses svcmap_devaddr) */
	__u16 snat_port_min; /* SNAT source ports, host order: above the */
	__u16 snat_port_max; /* kernel's ephemeral range by default */
	__u32 flags;         /* SVCMAP_CFG_* */
};

/* The agent is moving the maps to new ones (src/maps/migration/): no new tc
 * flow gets a conntrack entry the copy could miss; its first packet is
 * dropped (DP_R_MIGRATION_HOLD) and the client's retransmission meets the
 * new programs. Set for the moment around the switch only. */
#define SVCMAP_CFG_MIGRATION_HOLD 0x1

/*
 * The SNAT source address per egress device (hash map, svcmap_devaddr):
 * ifindex (__u32, host order) -> that device's primary IPv4 address. A SNATed
 * flow takes the address of the device the FIB sends its backend's packets
 * out of, as MASQUERADE does. The agent keeps it in step with the node's
 * addresses (every device with an IPv4 address, the listed ones or not).
 */
struct dev_addr_value {
	__be32 addr;
};

/* svcmap_devaddr6: ifindex -> the device's first global IPv6 address (no
 * link-local ones: a backend on another node could not answer them through
 * a router). */
struct dev_addr6_value {
	__be32 addr[4];
};

/* ==== The socket hooks' node settings: svcmap_sockcfg ==== */

/*
 * What the socket hooks do for the node's own sockets (array map, one entry
 * at key 0, written by the agent before it attaches the hooks). The node's
 * own: a socket whose network namespace is host_netns (the agent's, a
 * host-network pod's: bpf_get_netns_cookie()), not a pod's; 0 (not written
 * yet) matches no socket. A pod's 127.0.0.1 is its own loopback, and its
 * binds are in its own port space: neither is the node's.
 *  SOCK_CFG_LOCALHOST4: 127.0.0.0/8:NodePort (and 0.0.0.0:NodePort, which
 *                       connect() takes as a local address) reaches the
 *                       NodePort through its wildcard entry.
 *  SOCK_CFG_LOCALHOST6: [::1]:NodePort (and [::]:NodePort) likewise.
 *  SOCK_CFG_BIND_PROTECT: bind() to a port a NodePort of the socket's
 *                       protocol holds fails with EADDRINUSE, on the
 *                       wildcard address, on an address that serves
 *                       NodePorts (it has a NodePort entry of its own), and
 *                       on loopback where localhost NodePorts are served.
 *  SOCK_CFG_HOST_ONLY:  the socket LB translates the node's own sockets
 *                       only (--socket-lb=host-only): pods' sockets are left
 *                       alone, their traffic is translated per packet at
 *                       their veths (bpf/veth.c), where a sidecar proxy's
 *                       iptables REDIRECT has seen the ClusterIP first.
 *  SOCK_CFG_POD_BYPASS: svcmap_sock_byp holds pods whose sockets the socket
 *                       LB leaves alone in every mode (svcmap.io/socket-lb:
 *                       bypass on the Pod or its Namespace); off while the
 *                       map is empty, so that other sockets pay no lookup.
 */
#define SOCK_CFG_LOCALHOST4   0x1
#define SOCK_CFG_LOCALHOST6   0x2
#define SOCK_CFG_BIND_PROTECT 0x4
#define SOCK_CFG_HOST_ONLY    0x8
#define SOCK_CFG_POD_BYPASS   0x10

struct sock_config {
	__u64 host_netns; /* the network namespace cookie of the node's own sockets */
	__u32 flags;      /* SOCK_CFG_* */
	__u32 pad;
};

/* ==== Pods that bypass the socket LB: svcmap_sock_byp ==== */

/*
 * Hash map: the cgroup id (cgroup v2: the directory's inode number) of a
 * bypassed Pod's pod-level cgroup -> struct sock_bypass. The kubelet makes
 * that cgroup before any of the Pod's containers starts, and every process
 * of the Pod runs below it; the socket hooks look for the calling task's
 * ancestors at levels 1..SOCK_BYP_MAX_LEVEL (bpf_get_current_ancestor_cgroup_id:
 * sock_addr programs cannot ask for the socket's, bpf_sk_ancestor_cgroup_id).
 */
#define SOCK_BYP_MAX_LEVEL 16
/* "namespace/name": 63 + 1 + 253 bytes, NUL-terminated. */
#define SVCMAP_SOCK_BYP_POD_LEN 320

struct sock_bypass {
	__u32 level; /* the cgroup's depth below the cgroup mount the agent sees */
	__u32 pad;
	char pod[SVCMAP_SOCK_BYP_POD_LEN]; /* the Pod: what dump and status show; the datapath reads none of it */
};

/* ==== Datapath counters: svcmap_metrics ==== */

/*
 * Datapath counters (per-CPU array): every packet a tc program sees and
 * every call of a socket hook is counted exactly once, under the hook that
 * saw it and the one reason that says what became of it. The index is
 * hook * DP_REASON_STRIDE + reason, with room to spare so that new hooks and
 * reasons keep the layout of a pinned map; the agent sums the CPUs and
 * exports svcmap_datapath_packets_total{hook,reason}. Not every reason
 * occurs at every hook (src/maps/constants.ts says which do).
 */
enum dp_hook {
	DP_HOOK_TC_INGRESS   = 0,
	DP_HOOK_TC_EGRESS    = 1,
	DP_HOOK_CONNECT4     = 2,
	DP_HOOK_SENDMSG4     = 3,
	DP_HOOK_RECVMSG4     = 4,
	DP_HOOK_GETPEERNAME4 = 5,
	DP_HOOK_CONNECT6     = 6,
	DP_HOOK_SENDMSG6     = 7,
	DP_HOOK_RECVMSG6     = 8,
	DP_HOOK_GETPEERNAME6 = 9,
	DP_HOOK_BIND4        = 10,
	DP_HOOK_BIND6        = 11,
	DP_HOOK_VETH_INGRESS = 12, /* a pod's veth, host side: what the pod sends */
	DP_HOOK_VETH_EGRESS  = 13, /* a pod's veth, host side: what the pod receives */
	DP_HOOK_XDP          = 14, /* an external device's XDP: NodePort/LoadBalancer/externalIP before the stack */
	DP_HOOK_MAX          = 15,
};

enum dp_reason {
	/* Handed on untouched. */
	DP_R_PASSED            = 0, /* not for svcmap: no frontend, no tracked flow (also for an ICMP error's quote) */
	DP_R_OTHER_PROTO       = 1, /* tc: not IP TCP, UDP or an ICMP error (ARP, ICMP echo, ICMPv6 neighbour discovery, ...) */
	DP_R_MALFORMED         = 2, /* tc: IPv4 or L4 header cut short or invalid: the stack judges it */
	/* Translated. */
	DP_R_TRANSLATED        = 3, /* to a backend: tc forwarded it; socket: sent to the backend */
	DP_R_REPLY_TRANSLATED  = 4, /* back to the frontend: tc reply; socket: recvmsg/getpeername show the VIP */
	DP_R_TO_STACK_NO_ROUTE = 5, /* tc: translated, but no forwardable route (local, blackhole, forwarding off): to the stack */
	DP_R_TO_STACK_MTU      = 6, /* tc: translated, larger than the egress MTU: to the stack (fragments or ICMP) */
	DP_R_TO_STACK_TTL      = 7, /* tc: translated, the TTL runs out: to the stack (ICMP time exceeded) */
	DP_R_ICMP_TRANSLATED   = 8, /* tc: an ICMP error about a tracked flow, translated back */
	DP_R_SK_REVNAT_FAILED  = 9, /* socket: translated, but the per-socket reverse entry could not be written */
	/* Dropped (tc) or refused with ECONNREFUSED (socket). */
	DP_R_NO_BACKEND        = 10, /* the frontend has no backends (or its slot's backend is gone) */
	DP_R_NO_LOCAL_ENDPOINT = 11, /* tc: externalTrafficPolicy Local and no endpoint on this node */
	DP_R_SOURCE_DENIED     = 12, /* tc: outside the frontend's loadBalancerSourceRanges */
	DP_R_NO_SNAT_ADDR      = 13, /* tc: SNAT needed and the egress device has no address in svcmap_devaddr */
	DP_R_SNAT_EXHAUSTED    = 14, /* tc: no free SNAT port towards the backend */
	DP_R_CT_INSERT_FAILED  = 15, /* tc: the conntrack entry could not be stored */
	DP_R_REWRITE_FAILED    = 16, /* tc: a header or checksum write failed mid-packet */
	/* Handed on. */
	DP_R_FRAGMENT          = 17, /* tc: an IP fragment of no datagram svcmap translates (or ahead of its first): untouched */
	DP_R_REVNAT_STALE      = 18, /* socket: the reverse entry's frontend is gone: entry removed, the real peer shown */
	DP_R_SNAT_NO_ROUTE     = 19, /* tc: SNAT needed and the FIB has no forwardable route to the backend */
	DP_R_IPV6_EXT_HDR      = 20, /* tc: IPv6 whose next header is not TCP, UDP or ICMPv6 (extension headers, fragments): untouched */
	DP_R_BIND_DENIED       = 21, /* bind: the node's own socket asked for a port a NodePort holds: EADDRINUSE */
	DP_R_MIGRATION_HOLD    = 22, /* tc: a new flow while the agent moves the maps (SVCMAP_CFG_MIGRATION_HOLD): dropped, retried */
	DP_R_SOCK_BYPASSED     = 23, /* socket: a pod's socket the socket LB leaves to its veth (host-only, or a bypassed pod) */
	DP_R_TO_TC             = 24, /* xdp: what XDP leaves to tc (ICMP, fragments, a partial checksum, no route XDP can take): untouched */
	DP_R_DSR_ACCEPTED      = 25, /* tc: a DSR option naming a DSR frontend: recorded, removed, on to the local backend */
	DP_R_DSR_BAD_FRONTEND  = 26, /* tc: a DSR option naming no DSR frontend of this node: dropped */
	DP_R_DSR_MALFORMED     = 27, /* tc: a DSR option of the wrong length or protocol, or cut short: dropped */
	DP_R_DSR_OPT_FAILED    = 28, /* tc: the DSR option could not be added (no room in the IPv4 header): dropped */
	DP_R_MAX               = 29,
};

#define DP_REASON_STRIDE   32
#define SVCMAP_METRICS_MAX 512 /* 16 hooks of DP_REASON_STRIDE reasons */

struct dp_counter {
	__u64 packets;
};

/* ==== Socket termination: svcmap_sk_term, svcmap_sk_term6 ==== */

/*
 * Socket termination (bpf/sock_destroy.c), hash map svcmap_sk_term: the
 * backends that just left a frontend, which the agent writes before it runs
 * the socket iterators. A connected socket is destroyed (bpf_sock_destroy,
 * the application sees ECONNABORTED) when its destination is {addr, port},
 * its protocol is proto, and its per-socket reverse NAT entry (so: the
 * socket LB translated it) names the frontend rev_nat_id. Not pinned: the
 * agent's working set for one run. The value (__u8) is unused.
 */

struct sock_term_key {
	__be32 addr; /* backend address */
	__be16 port; /* backend port */
	__u8 proto;  /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
	__u32 rev_nat_id; /* the frontend the backend left */
};

/* Socket termination of IPv6 sockets (svcmap_sk_term6), as struct sock_term_key. */
struct sock_term6_key {
	__be32 addr[4]; /* backend address */
	__be16 port;    /* backend port */
	__u8 proto;     /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
	__u32 rev_nat_id; /* the frontend (of svcmap_revnat6) the backend left */
};

#endif /* SVCMAP_MAPS_H */
