// regression-issue-74839: the raw-socket client of the "should drop INVALID
// conntrack entries" spec (it sends a TCP segment outside the window and
// checks that no RST is forwarded), under the name e2e.test asks for: the
// static program make cluster-bins builds from the same Kubernetes module
// (k8s.io/kubernetes/test/images/regression-issue-74839), FROM scratch, as
// upstream's Dockerfile (ADD the binary, ENTRYPOINT it).
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { bin } from '../paths.ts';
import type { Recipe } from './recipe.ts';
import { requirePath } from './scratch.ts';
import { e2eImageRef } from './upstream.ts';

export const regressionIssue74839: Recipe = {
  name: 'regression-issue-74839',
  module: import.meta.url,
  async inputs() {
    requirePath(bin('regression-issue-74839'), 'run make cluster-bins');
    return [{ fact: await this.ref('') }, { path: bin('regression-issue-74839') }];
  },
  async ref() {
    return e2eImageRef('RegressionIssue74839');
  },
  config: { entrypoint: ['/regression-issue-74839'] },
  async fill(root) {
    copyFileSync(bin('regression-issue-74839'), join(root, 'regression-issue-74839'));
  },
};
