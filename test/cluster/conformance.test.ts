/**
 * Kubernetes' own tests judge switchyard: every [Conformance] spec of
 * sig-network from the upstream e2e suite (built from the pinned
 * k8s.io/kubernetes module), run by ginkgo against a lab cluster whose only
 * Service proxy is the switchyard DaemonSet. The full comparison with
 * kube-proxy (every Service spec, both proxies) is scripts/conformance.sh.
 * The cluster is removed afterwards, also when a spec fails.
 */
import { test } from 'node:test';
import { CONFORMANCE_FOCUS, runSuite } from '../../harness/lab/conformance.js';
import { requireLabCapabilities, testPort } from '../lab/capabilities.js';
import { assertConformancePasses } from '../lab/conformance-check.js';

test('the [Conformance] specs of sig-network pass against switchyard', { timeout: 40 * 60_000 }, async () => {
  requireLabCapabilities();
  await assertConformancePasses('conformance', (outDir) =>
    runSuite({ proxy: 'switchyard', outDir, focus: CONFORMANCE_FOCUS, procs: 4, prefix: process.env.SY_TEST_CONFORMANCE_PREFIX ?? 'syce', adminPort: testPort(42), agentPort: testPort(43) }),
  );
});
