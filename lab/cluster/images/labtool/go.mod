// labtool: the static test tool of the real-cluster checks (servers and
// clients in one binary, standard library only).
module svcmap.local/cluster/labtool

go 1.26
