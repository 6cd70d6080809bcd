// SVCMAP_TEST_LAYOUT=1 makes the agent run objects built with one map layout
// changed (struct backend_value gains reserved_test), so that the upgrade
// tests have a layout that differs without a real release that changed one.
// Test only (docs/upgrade.md); the image ships both object sets.

export const TEST_LAYOUT_ENV = 'SVCMAP_TEST_LAYOUT';
/** The -D switch the test objects are compiled with. */
export const TEST_LAYOUT_DEFINES: Readonly<Record<string, number>> = { SVCMAP_TEST_LAYOUT: 1 };

/** True when this process runs the test layout. */
export function testLayout(): boolean {
  return process.env[TEST_LAYOUT_ENV] === '1';
}
