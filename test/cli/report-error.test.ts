// How the CLI turns an error into what it prints and its exit code, and the
// parsing of a command's one argument (in-process; errors.test.ts runs the
// compiled CLI).
import t from 'tap';
import { z } from 'zod';
import { UsageError, command, parseFlagsAndArg } from '../../src/cli/args.ts';
import { debugRequested, reportError } from '../../src/cli/errors.ts';

t.test('one line, "svcmap: " once; exit 2 for usage, 1 for the rest', async (t) => {
  t.same(reportError(new Error('nothing is pinned at /x'), false), { text: 'svcmap: nothing is pinned at /x\n', exitCode: 1 });
  t.same(
    reportError(new UsageError('svcmap dump: --output: must be table, json or yaml'), false),
    { text: 'svcmap dump: --output: must be table, json or yaml\n', exitCode: 2 },
    'a message naming its command keeps its own prefix',
  );
  t.same(reportError(new UsageError('unknown command "x"; run svcmap help'), false), {
    text: 'svcmap: unknown command "x"; run svcmap help\n',
    exitCode: 2,
  });
  t.same(reportError('a string', false), { text: 'svcmap: a string\n', exitCode: 1 });
  t.notMatch(reportError(new Error('x'), false).text, /\n {4}at /, 'no stack');
});

t.test('a bug says how to get its stack trace', async (t) => {
  const err = (() => {
    try {
      (undefined as unknown as { a: number }).a;
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  t.match(
    reportError(err, false).text,
    /^svcmap: Cannot read properties of undefined \(reading 'a'\) \(a bug in svcmap: run with SVCMAP_DEBUG=1 for the stack trace and report it\)\n$/,
  );
});

t.test('debug: the line, then the frames', async (t) => {
  const err = new Error('first line\n  detail');
  const { text } = reportError(err, true);
  t.ok(text.startsWith('svcmap: first line\n  detail\n    at '), text);
  t.equal(text.match(/first line/g)?.length, 1, 'the message once');
  t.match(text, /report-error\.test\.ts/, 'frames of this file');
});

t.test('debug is asked for by --log-level debug anywhere, or SVCMAP_DEBUG=1', async (t) => {
  t.ok(debugRequested(['dump', '--log-level', 'debug'], {}));
  t.ok(debugRequested(['--log-level=debug', 'status'], {}));
  t.ok(debugRequested(['dump'], { SVCMAP_DEBUG: '1' }));
  t.notOk(debugRequested(['dump', '--log-level', 'info'], {}));
  t.notOk(debugRequested(['dump', '--pin-dir', 'debug'], {}));
  t.notOk(debugRequested(['dump'], { SVCMAP_DEBUG: '0' }));
  t.notOk(debugRequested(['dump', '--log-level'], {}));
});

t.test('parseFlagsAndArg: exactly one argument, validated, named in the error', async (t) => {
  const spec = command({
    name: 'cmd',
    summary: '',
    description: '',
    operand: {
      name: 'THING',
      schema: z
        .string()
        .regex(/^[a-z]+$/, 'must be lower-case letters')
        .transform((s) => s.length),
    },
    flags: { n: { value: 'N', schema: z.string(), help: '' }, yes: { help: '' } },
  });
  const parse = (argv: string[]) => parseFlagsAndArg(spec, argv);
  const common = { 'log-level': 'info', help: false };
  t.same(parse(['abc', '--n', 'x']), { flags: { n: 'x', yes: false, ...common }, arg: 3 });
  t.same(parse(['--n', 'x', 'ab', '--yes']), { flags: { n: 'x', yes: true, ...common }, arg: 2 }, 'flags before or after');
  t.throws(() => parse([]), new UsageError('svcmap cmd: missing THING (see svcmap cmd --help)'));
  t.throws(() => parse(['a', 'b']), new UsageError('svcmap cmd: unexpected argument "b" (see svcmap cmd --help)'));
  t.throws(() => parse(['A1']), new UsageError('svcmap cmd: THING: must be lower-case letters'));
  t.throws(() => parse(['a', '--m']), new UsageError('svcmap cmd: unknown flag --m (see svcmap cmd --help)'));
  t.throws(() => parse(['a', '--n']), new UsageError('svcmap cmd: --n needs a value: --n N (see svcmap cmd --help)'));
  t.throws(() => parse(['a', '--yes=1']), new UsageError('svcmap cmd: --yes takes no value (see svcmap cmd --help)'));
});
