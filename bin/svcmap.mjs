#!/usr/local/bin/node
// The svcmap CLI where there is no shell: the runtime image's /app/bin/svcmap
// (the image has node at /usr/local/bin/node and nothing to run bin/svcmap,
// a shell script, with). The Node flags bin/svcmap passes come from the
// image's NODE_OPTIONS instead (lab/cluster/images/svcmap.ts, Dockerfile).
import '../dist/cli/main.js';
