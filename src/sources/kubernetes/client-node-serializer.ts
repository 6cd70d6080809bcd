// What client-node's cache.js (ListWatch) uses of ./serializer.js (see
// client-node.ts): ObjectSerializer.serialize(selector, 'string'), which for
// a primitive type returns the value as it is. Any other type would need the
// generated model classes this module exists to avoid loading, so it fails
// loudly instead of serializing differently.
const PRIMITIVES = new Set(['string', 'boolean', 'double', 'integer', 'long', 'float', 'number', 'any']);

export const ObjectSerializer = {
  serialize(data: unknown, type: string): unknown {
    if (data === undefined || data === null || PRIMITIVES.has(type.toLowerCase())) return data;
    throw new Error(`svcmap loads no client-node model classes: cannot serialize a ${type}`);
  },
};
